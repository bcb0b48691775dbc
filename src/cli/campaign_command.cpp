// `d2k campaign run PLAN` (and `--dry-run`, `--shard I/N`), `d2k campaign status CAMPAIGN`: campaigns of
// agent runs (src/campaign); `submit --slurm` and `merge` are in campaign_slurm.cpp. Exit status of run: 0
// when every run finished (whatever the models scored), 1 when some run failed for d2k's own reasons (it
// is tried again by the next `d2k campaign run`), 2 for bad usage or a harness error.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "campaign/estimate.hpp"
#include "campaign/plan.hpp"
#include "campaign/runner.hpp"
#include "campaign/store.hpp"
#include "cli/campaign_paths.hpp"
#include "cli/campaign_slurm.hpp"
#include "cli/commands.hpp"
#include "cli/run_options.hpp"
#include "core/error.hpp"
#include "core/task_loader.hpp"
#include "eval/workloads.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;
using namespace d2k::campaign;

struct CampaignOptions {
  std::string plan;
  std::string dir;  // default: <cache>/campaigns/<name>
  bool dry_run = false;
  std::string sandbox;  // overrides the plan's (the machine's choice, as for d2k agent)
  double progress_seconds = 10;
  std::string shard;      // I/N: one shard of the plan (campaign/shard.hpp), as a Slurm array task runs it
  std::string locks_dir;  // the device locks' folder (default: <cache>/locks)
  std::string campaign;  // status
};

int run_command(const CampaignOptions& o, const GlobalOptions& global) {
  auto plan = load_plan(o.plan);
  if (!o.sandbox.empty()) plan.sandbox = o.sandbox;
  const auto context = make_context(global.root);
  CampaignSetup setup;
  const auto models = load_plan_models(plan);
  check_plan(plan, models, context, setup.tasks);
  if (o.dry_run) {
    print_estimate(std::cout, plan, estimate(plan, models));
    return 0;
  }
  RunOptions run;
  run.device = plan.device;
  run.sandbox = plan.sandbox;
  run.max_seconds = plan.timing.max_seconds;
  run.min_samples = plan.timing.min_samples;
  run.warmup = plan.timing.warmup;
  run.timeout = plan.timing.worker_timeout_seconds;
  run.no_baseline = !plan.timing.baseline;
  setup.environment = make_environment(environment_options(run, context));
  // Triton with a device that resolved to cpu is refused before the campaign's folder is made.
  campaign_language(plan, setup.environment.device);
  setup.eval = eval_settings(run, setup.environment.device);
  setup.plan = plan;
  setup.paths.dir = campaign_dir_of(plan, o.dir, context);
  if (!o.shard.empty()) {
    setup.paths.shard = parse_shard(o.shard);
    if (shard_runs(plan.runs(), setup.paths.shard).empty())
      fail("--shard {}: the plan has {} runs, so {} has none", o.shard, plan.runs().size(), name_of(setup.paths.shard));
  }
  check_campaign_mode(setup.paths.dir, setup.paths.shard);
  setup.models = models;
  setup.locks_dir = o.locks_dir.empty() ? context.cache_dir / "locks" : fs::absolute(o.locks_dir);
  setup.root = context.root.string();
  setup.out = &std::cerr;
  setup.progress_seconds = o.progress_seconds;
  std::cerr << fmt::format("d2k campaign: {} in {}{}\n", plan.name, setup.paths.dir.string(),
                           setup.paths.shard.whole() ? "" : fmt::format(", {} (store {})", name_of(setup.paths.shard),
                                                                        setup.paths.store().string()));
  const auto outcome = run_campaign(setup);
  std::cout << fmt::format("campaign {}: {} of {} runs finished, {} passed, {} failed; d2k report {}\n", plan.name,
                           outcome.finished, outcome.runs, outcome.passed, outcome.failed, setup.paths.dir.string());
  return outcome.failed > 0 ? 1 : 0;
}

// A line per shard store of the campaign's folder: its runs by state and whether a process drives it.
void print_shards(const fs::path& dir) {
  for (const auto& f : find_shard_stores(dir)) {
    Store store(f.file);
    int counts[4] = {};
    const auto runs = store.runs();
    for (const auto& r : runs) ++counts[static_cast<int>(r.state)];
    const auto holder = CampaignLock::holder(shard_lock(dir, f.shard));
    std::cout << fmt::format("  {} ({}): {} runs, {} finished, {} running, {} pending, {} failed; {}\n", name_of(f.shard),
                             f.file.filename().string(), runs.size(), counts[2], counts[1], counts[0], counts[3],
                             holder ? fmt::format("being run by process {}", *holder) : "not running");
  }
}

int status_command(const CampaignOptions& o, const GlobalOptions& global) {
  const auto context = make_context(global.root);
  const fs::path given(o.campaign);
  // A folder of shard stores that were not merged yet: the shards alone.
  for (const auto& dir : {given, context.cache_dir / "campaigns" / o.campaign}) {
    std::error_code error;
    if (fs::is_directory(dir, error) && !fs::exists(dir / "campaign.db") && !find_shard_stores(dir).empty()) {
      std::cout << fmt::format("campaign in {}: shard stores not merged yet (d2k campaign merge {})\n", dir.string(),
                               dir.string());
      print_shards(dir);
      return 0;
    }
  }
  const auto paths = campaign_paths(o.campaign, context);
  Store store(paths.store());
  const auto info = store.campaign();
  if (!info) fail("{}: the store holds no campaign yet", paths.store().string());
  int counts[4] = {};
  const auto runs = store.runs();
  for (const auto& r : runs) ++counts[static_cast<int>(r.state)];
  const auto usage = store.usage_totals();
  const auto holder = CampaignLock::holder(paths.lock());
  std::cout << fmt::format("campaign {} ({} device, {}; language {}): {}\n", info->name, info->device, info->device_name,
                           info->language,
                           holder ? fmt::format("being run by process {}", *holder)
                                  : fmt::format("not running (continue with d2k campaign run {})", info->plan_file));
  std::cout << fmt::format("runs: {} in all, {} finished, {} running, {} pending, {} failed\n", runs.size(), counts[2],
                           counts[1], counts[0], counts[3]);
  std::cout << fmt::format("responses: {}; tokens: {} input ({} cached), {} output; cost ${:.4f}\n", usage.responses,
                           usage.input_tokens, usage.cached_input_tokens, usage.output_tokens, usage.cost_usd);
  for (const auto& r : runs) {
    if (r.state == RunState::running) {
      const auto turns = store.turns(r.plan.key);
      std::cout << fmt::format("  running {}: {} turns so far, started {}\n", r.plan.key, turns.size(), r.started);
    } else if (r.state == RunState::failed) {
      std::cout << fmt::format("  failed {}: {}\n", r.plan.key, r.error);
    }
  }
  if (!find_shard_stores(paths.dir).empty()) {
    std::cout << "shard stores (the figures above are of the last d2k campaign merge):\n";
    print_shards(paths.dir);
  }
  return 0;
}

}  // namespace

Command add_campaign_command(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<CampaignOptions>();
  auto* command = app.add_subcommand("campaign", "campaigns of agent runs: models x tasks x conditions x repeats");
  command->require_subcommand(1);
  auto* run = command->add_subcommand("run", "run (or continue) the campaign of a plan");
  run->add_option("plan", options->plan, "the plan (TOML; see docs/campaigns.md)")->required();
  run->add_option("--dir", options->dir, "the campaign's folder (default: <cache>/campaigns/<campaign.name>)");
  run->add_flag("--dry-run", options->dry_run, "print the runs and the token and dollar bounds; run nothing");
  run->add_option("--sandbox", options->sandbox, "strict, best-effort or off (overrides the plan's)");
  run->add_option("--progress-seconds", options->progress_seconds, "a progress line this often")->capture_default_str();
  run->add_option("--shard", options->shard,
                  "I/N: run shard I (from 0) of N, into its own store (as a Slurm array task does; docs/campaigns.md)");
  run->add_option("--locks-dir", options->locks_dir, "the device locks' folder (default: <cache>/locks)");
  auto* status = command->add_subcommand("status", "where a campaign stands (reads its store; safe while it runs)");
  status->add_option("campaign", options->campaign, "the campaign's folder, its campaign.db, or its name")->required();
  auto submit_options = std::make_shared<SubmitOptions>();
  auto* submit = add_submit_command(*command, *submit_options);
  auto merge_options = std::make_shared<MergeOptions>();
  auto* merge = add_merge_command(*command, *merge_options);
  return {command, [options, submit_options, merge_options, &global, run, status, submit, merge]() -> int {
            if (run->parsed()) return run_command(*options, global);
            if (status->parsed()) return status_command(*options, global);
            if (submit->parsed()) return submit_command(*submit_options, global);
            if (merge->parsed()) return merge_command(*merge_options, global);
            return 2;
          }};
}

}  // namespace d2k
