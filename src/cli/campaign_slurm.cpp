#include "cli/campaign_slurm.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "campaign/merge.hpp"
#include "campaign/plan.hpp"
#include "campaign/shard.hpp"
#include "campaign/slurm.hpp"
#include "campaign/store.hpp"
#include "cli/campaign_paths.hpp"
#include "core/error.hpp"
#include "core/timestamp.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;
using namespace d2k::campaign;

// <dir>/slurm: the scripts submitted (<job>.sbatch), the tasks' consoles (<job>_<shard>.out) and
// submissions.jsonl, a line per submission (its job id and shards).
fs::path slurm_dir(const fs::path& dir) { return dir / "slurm"; }
fs::path submissions_file(const fs::path& dir) { return slurm_dir(dir) / "submissions.jsonl"; }

std::set<std::string> submitted_jobs(const fs::path& dir) {
  std::set<std::string> jobs;
  std::ifstream in(submissions_file(dir));
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("job") && j["job"].is_string()) jobs.insert(j["job"].get<std::string>());
  }
  return jobs;
}

}  // namespace

void check_campaign_mode(const fs::path& dir, const Shard& shard) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) return;
  const auto stores = find_shard_stores(dir);
  if (shard.whole()) {
    if (!stores.empty())
      fail("{}: the campaign runs as {} shards ({} ...): run a shard with --shard I/{}, or submit them with d2k "
           "campaign submit --slurm; d2k campaign merge combines them",
           dir.string(), stores.front().shard.count, stores.front().file.filename().string(), stores.front().shard.count);
    return;
  }
  if (!stores.empty() && stores.front().shard.count != shard.count)
    fail("{}: holds the stores of {} shards ({}); a run's shard depends on the count, so use {} shards (or start a new "
         "campaign in another --dir)",
         dir.string(), stores.front().shard.count, stores.front().file.filename().string(), stores.front().shard.count);
  // Shards would redo what a campaign run on one machine finished, and the merge would then meet two
  // results for one run.
  const auto file = dir / "campaign.db";
  if (!fs::is_regular_file(file)) return;
  Store store(file);
  if (!store.merged_shards().empty()) return;
  for (const auto& r : store.runs())
    if (r.state != RunState::pending)
      fail("{}: a campaign run on one machine (d2k campaign run without --shard) is in this folder; its shards would "
           "run its runs again. Use another --dir, or go on with d2k campaign run",
           file.string());
}

namespace {

fs::path self_program() {
  std::error_code error;
  auto exe = fs::read_symlink("/proc/self/exe", error);
  if (error) fail("cannot find the d2k program (/proc/self/exe): {}", error.message());
  return exe;
}

}  // namespace

CLI::App* add_submit_command(CLI::App& campaign, SubmitOptions& o) {
  auto* c = campaign.add_subcommand("submit", "run the campaign of a plan as a Slurm job array, one array task per shard");
  c->add_option("plan", o.plan, "the plan (TOML; see docs/campaigns.md)")->required();
  c->add_flag("--slurm", o.slurm, "submit to Slurm with sbatch (the one scheduler d2k knows; required)");
  c->add_option("--dir", o.dir,
                "the campaign's folder, on a file system every node sees (default: <cache>/campaigns/<campaign.name>)");
  c->add_flag("--dry-run", o.dry_run, "print the sbatch script and which shards it would run; submit nothing");
  c->add_option("--shards", o.shards, "array tasks, each a shard of the plan (default: the plan's slurm.shards)")
      ->check(CLI::PositiveNumber);
  c->add_option("--gpus-per-task", o.gpus_per_task,
                "GPUs per array task, as --gres=gpu:N (default: slurm.gpus_per_task, else 1; 0 on the cpu device)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--cpus-per-task", o.cpus_per_task, "CPUs per array task (default: slurm.cpus_per_task, else the partition's)")
      ->check(CLI::PositiveNumber);
  c->add_option("--minutes-per-run", o.minutes_per_run,
                "one agent run's time limit in minutes: the array task's --time follows from it (default: "
                "slurm.minutes_per_run)")
      ->check(CLI::PositiveNumber);
  c->add_option("--time", o.time, "the array task's --time as Slurm writes it (instead of the one from minutes per run)");
  c->add_option("--partition", o.partition, "sbatch --partition (default: slurm.partition)");
  c->add_option("--account", o.account, "sbatch --account (default: slurm.account)");
  c->add_option("--sbatch-option", o.sbatch_options, "one more #SBATCH option, as --name=value (repeatable)");
  return c;
}

CLI::App* add_merge_command(CLI::App& campaign, MergeOptions& o) {
  auto* c = campaign.add_subcommand("merge", "merge the shard stores of a campaign submitted to Slurm into one store");
  c->add_option("campaign", o.campaign, "the campaign's folder, or its name under <cache>/campaigns")->required();
  c->add_option("--store", o.stores, "a shard store to merge (repeatable; default: every campaign.shard-*-of-*.db of the folder)");
  c->add_option("--into", o.into, "the merged store (default: <folder>/campaign.db, which d2k report reads)");
  return c;
}

int submit_command(const SubmitOptions& o, const GlobalOptions& global) {
  if (!o.slurm) fail("d2k campaign submit: say --slurm (Slurm is the one scheduler d2k submits to)");
  const auto plan = load_plan(o.plan);
  const auto context = make_context(global.root);
  std::map<std::string, Task> tasks;
  check_plan(plan, load_plan_models(plan), context, tasks);
  const auto dir = campaign_dir_of(plan, o.dir, context);
  const auto runs = plan.runs();

  const std::optional<int> shards_given = o.shards ? o.shards : plan.slurm.shards;
  if (!shards_given)
    fail("{}: how many shards? Give --shards N or slurm.shards in the plan (each shard is one array task)",
         plan.file.string());
  const int shards = *shards_given;
  if (shards > static_cast<int>(runs.size()))
    fail("--shards {}: the plan has {} runs; at most one shard per run", shards, runs.size());
  check_campaign_mode(dir, {0, shards});

  // Which shards to submit: those with work left that Slurm does not hold already.
  std::string warning;
  const auto queued = active_shards(submitted_jobs(dir), &warning);
  if (!warning.empty())
    std::cerr << fmt::format("d2k campaign submit: warning: cannot ask Slurm which shards are queued ({}); "
                             "a shard submitted twice stops at once on the other's lock\n", warning);
  std::vector<int> array;
  int largest = 0;
  for (int i = 0; i < shards; ++i) {
    const Shard shard{i, shards};
    largest = std::max(largest, static_cast<int>(shard_runs(runs, shard).size()));
    const auto progress = shard_progress(shard_store(dir, shard), plan, shard);
    if (progress.done()) {
      std::cerr << fmt::format("d2k campaign submit: {}: done ({} runs finished); not submitted\n", name_of(shard),
                               progress.finished);
    } else if (queued.count(i)) {
      std::cerr << fmt::format("d2k campaign submit: {}: still queued or running in Slurm; not submitted again\n",
                               name_of(shard));
    } else {
      if (progress.started)
        std::cerr << fmt::format("d2k campaign submit: {}: {} of {} runs finished ({} runs and {} expert or re-run "
                                 "evaluations left): resubmitted; what finished is skipped\n",
                                 name_of(shard), progress.finished, progress.runs, progress.left - progress.evaluations_left,
                                 progress.evaluations_left);
      array.push_back(i);
    }
  }

  SbatchJob job;
  job.campaign = plan.name;
  job.shards = shards;
  job.array = array;
  job.gpus_per_task = o.gpus_per_task ? *o.gpus_per_task
                      : plan.slurm.gpus_per_task ? *plan.slurm.gpus_per_task
                      : plan.device == "cpu"     ? 0
                                                 : 1;
  job.cpus_per_task = o.cpus_per_task ? o.cpus_per_task : plan.slurm.cpus_per_task;
  const auto minutes_per_run = o.minutes_per_run ? o.minutes_per_run : plan.slurm.minutes_per_run;
  if (minutes_per_run) job.time_minutes = array_task_minutes(*minutes_per_run, largest, plan.concurrent_runs);
  job.partition = o.partition.empty() ? plan.slurm.partition : o.partition;
  job.account = o.account.empty() ? plan.slurm.account : o.account;
  job.options = plan.slurm.sbatch_options;
  if (!o.time.empty()) job.options.push_back("--time=" + o.time);
  for (const auto& option : o.sbatch_options) job.options.push_back(option);
  job.d2k = self_program();
  job.root = context.root;
  job.plan = plan.file;
  job.dir = dir;
  job.output = slurm_dir(dir);

  if (array.empty()) {
    std::cerr << fmt::format("d2k campaign submit: {}: no shard left to submit; when none is queued: d2k campaign "
                             "merge {}\n",
                             plan.name, dir.string());
    return 0;
  }
  if (!o.time.empty() && job.time_minutes) job.time_minutes.reset();  // --time wins
  const auto script = sbatch_script(job);
  if (o.dry_run) {
    std::cout << script;
    std::cerr << fmt::format("d2k campaign submit: dry run: would submit shards {} of {}\n", array_spec(array), shards);
    return 0;
  }
  fs::create_directories(slurm_dir(dir));
  const auto pending = slurm_dir(dir) / "submit.sbatch";
  {
    std::ofstream out(pending);
    out << script;
    if (!out) fail("{}: cannot write the sbatch script", pending.string());
  }
  const auto id = submit_array(pending);
  const auto kept = slurm_dir(dir) / (id + ".sbatch");
  fs::rename(pending, kept);
  {
    std::ofstream out(submissions_file(dir), std::ios::app);
    out << nlohmann::json{{"job", id}, {"time", utc_timestamp()}, {"shards", shards}, {"array", array},
                          {"script", kept.string()}}.dump()
        << "\n";
  }
  std::cerr << fmt::format("d2k campaign submit: {}: job {}, array tasks {} (shards of {}); script {}; consoles "
                           "{}/{}_<shard>.out; when they end: d2k campaign merge {}\n",
                           plan.name, id, array_spec(array), shards, kept.string(), slurm_dir(dir).string(), id,
                           dir.string());
  std::cout << id << "\n";
  return 0;
}

int merge_command(const MergeOptions& o, const GlobalOptions& global) {
  const auto context = make_context(global.root);
  fs::path dir(o.campaign);
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    const auto named = context.cache_dir / "campaigns" / o.campaign;
    if (o.campaign.find('/') != std::string::npos || !fs::is_directory(named, error))
      fail("{}: no campaign folder there, nor at {}", o.campaign, named.string());
    dir = named;
  }
  dir = fs::absolute(dir);
  std::vector<fs::path> stores(o.stores.begin(), o.stores.end());
  if (stores.empty()) {
    for (const auto& f : find_shard_stores(dir)) stores.push_back(f.file);
    if (stores.empty()) fail("{}: no shard stores (campaign.shard-<i>-of-<n>.db) in it", dir.string());
  }
  const auto target = o.into.empty() ? dir / "campaign.db" : fs::absolute(o.into);
  const auto result = merge_shards(target, stores);
  for (const auto& m : result.merged)
    std::cout << fmt::format("{}: {}\n", name_of(m.shard), m.file.string());
  for (const auto& e : result.empty)
    std::cout << fmt::format("{}: {} (stopped before it recorded the plan: its runs stay pending)\n", name_of(e.shard),
                             e.file.string());
  for (const int i : result.missing)
    std::cout << fmt::format("shard {} of {}: missing (no store: never started, or not given); its runs stay pending\n",
                             i, result.shards);
  const auto& c = result.counts;
  std::cout << fmt::format("merged into {}: {} runs updated, {} unchanged; {} evaluations added, {} unchanged; {} usage "
                           "rows and {} judge scores added\n",
                           result.target.string(), c.runs_updated, c.runs_unchanged, c.evaluations_added,
                           c.evaluations_unchanged, c.turns_added, c.judge_scores_added);
  if (result.evaluations_left > 0)
    std::cout << fmt::format("the shards still owe {} expert or re-run evaluations (a shard stopped after its runs)\n",
                             result.evaluations_left);
  std::cout << fmt::format("{} of {} runs finished{}; d2k report {}\n", result.finished, result.runs,
                           result.complete() ? "" : " (resubmit: d2k campaign submit --slurm, then merge again)",
                           result.target.parent_path() == dir ? dir.string() : result.target.string());
  return result.complete() ? 0 : 1;
}

}  // namespace d2k
