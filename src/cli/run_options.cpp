#include "cli/run_options.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <random>

#include "core/error.hpp"
#include "eval/jsonl_observer.hpp"
#include "eval/workloads.hpp"
#include "eval/silent_observer.hpp"
#include "eval/text_observer.hpp"

namespace d2k {

void add_run_options(CLI::App& command, RunOptions& options, RunOptionsFor use) {
  const bool agent = use == RunOptionsFor::agent;
  command.add_option("--device", options.device, "auto, cuda or cpu (auto: cuda when a GPU is usable)")
      ->capture_default_str();
  command.add_option("--workload,-w", options.workloads,
                     agent ? "use only these published workloads (repeatable)" : "run only these workloads (repeatable)");
  auto* seed = command.add_option("--seed", options.seed, agent ? "the run's seed (default: random)" : "seed of the input draw");
  seed->each([&options](const std::string&) { options.seed_given = true; });
  if (!agent) seed->capture_default_str();
  command.add_flag("--no-baseline", options.no_baseline, "do not time the eager baseline");
  command.add_option("--timeout", options.timeout, "seconds a worker may run before it counts as hung")
      ->capture_default_str();
  command.add_option("--max-seconds", options.max_seconds, "timing budget per workload, seconds")
      ->capture_default_str();
  command.add_option("--min-samples", options.min_samples,
                     "timed calls at least per workload (default: 50 on cuda, 10 on cpu)");
  command.add_option("--warmup", options.warmup, "untimed calls before timing")->capture_default_str();
  command.add_flag("--refresh-ceilings", options.refresh_ceilings, "measure the device's ceilings again");
  command.add_option("--sandbox", options.sandbox,
                     "strict (isolation missing on this machine is an error), best-effort or off; docs/sandbox.md")
      ->capture_default_str();
  if (agent) return;
  command.add_option("--json", options.json, "write the traces and their summary as JSON to FILE ('-' for stdout)");
  command.add_option("--repeat", options.repeat,
                     "evaluate N times with seeds seed..seed+N-1 and report passes and the spread of medians")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  command.add_option("--time-limit", options.time_limit,
                     "with --repeat: start no run that the longest run so far says would end past SECONDS after the "
                     "first began; the runs done are reported (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--rotate", options.rotate,
                     "timed calls cycle through input copies holding this many times the L2 (0: no rotation)")
      ->capture_default_str();
  command.add_option("--progress", options.progress, "progress on stderr: text, jsonl (a JSON object per line) or none")
      ->check(CLI::IsMember({"text", "jsonl", "none"}))
      ->capture_default_str();
}

EvalSettings eval_settings(const RunOptions& options, Device device) {
  if (options.min_samples < 0) fail("--min-samples: must be at least 1 (or 0 for the default), not {}", options.min_samples);
  if (options.warmup < 0) fail("--warmup: must not be negative, not {}", options.warmup);
  if (options.rotate < 0) fail("--rotate: must not be negative, not {}", options.rotate);
  EvalSettings eval;
  eval.workloads = options.workloads;
  eval.seed = options.seed;
  eval.include_hidden = options.include_hidden || options.final;
  if (options.final && !options.seed_given) {
    // A fresh draw for every final evaluation: nothing a solution saw before can be replayed.
    std::random_device random;
    eval.seed = (static_cast<uint64_t>(random()) << 32) | random();
    std::cerr << fmt::format("d2k: final evaluation with seed {}\n", eval.seed);
  }
  eval.baseline = !options.no_baseline;
  eval.timing.max_seconds = options.max_seconds;
  eval.timing.min_samples = options.min_samples == 0 ? default_min_samples(device) : options.min_samples;
  eval.timing.warmup = options.warmup;
  eval.timing.rotate_cache_multiple = options.rotate;
  eval.worker_timeout_seconds = options.timeout;
  eval.tier = default_tier(device, options.workloads);
  return eval;
}

EnvironmentOptions environment_options(const RunOptions& options, const Context& context) {
  return {.device = options.device,
          .sandbox = options.sandbox,
          .refresh_ceilings = options.refresh_ceilings,
          .root = context.root,
          .cache_dir = context.cache_dir,
          .bin_dir = {},  // beside d2k
          .log = &std::cerr};
}

void say_smoke_tier(const std::vector<const Task*>& tasks, const EvalSettings& settings) {
  if (auto note = smoke_tier_note(tasks, settings.workloads, settings.include_hidden, settings.tier))
    std::cerr << "d2k: " << *note << '\n';
}

std::unique_ptr<EvalObserver> progress_observer(const RunOptions& options) {
  if (options.progress == "jsonl") return std::make_unique<JsonLinesObserver>(std::cerr);
  if (options.progress == "none") return std::make_unique<SilentObserver>();
  return std::make_unique<TextObserver>(std::cerr);
}

}  // namespace d2k
