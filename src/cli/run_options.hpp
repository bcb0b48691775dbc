// The run options: the flags every evaluating subcommand shares (device, workloads, seed, JSON, baseline,
// timeout, timing, repeat, rotation, sandbox, progress), added by one function and turned into the
// evaluator's settings and environment in one place each.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli/context.hpp"
#include "eval/environment.hpp"
#include "eval/evaluator.hpp"
#include "eval/observer.hpp"

namespace CLI {
class App;
}

namespace d2k {

struct RunOptions {
  std::string device = "auto";    // --device auto|cuda|cpu
  std::vector<std::string> workloads;
  uint64_t seed = 1;
  bool seed_given = false;        // --seed was on the command line
  std::string json;               // --json FILE ("-" for stdout)
  bool no_baseline = false;
  double timeout = 120.0;         // seconds per worker
  double max_seconds = 1.0;       // timing budget per workload
  int min_samples = 0;            // timed calls at least, even past max_seconds (0: default_min_samples)
  int warmup = 3;                 // untimed calls first
  int repeat = 1;                 // evaluate this many times, seeds seed, seed + 1, ...
  double time_limit = 0;          // --repeat: start no run that would end past this many seconds (0: none)
  double rotate = 3.0;            // input copies hold at least this multiple of the last-level cache (0: one)
  bool refresh_ceilings = false;
  std::string sandbox = "strict";  // --sandbox strict|best-effort|off (docs/sandbox.md)
  std::string progress = "text";   // --progress text|jsonl|none, on stderr
  // Set by the subcommand, not by a flag of the group.
  bool final = false;           // eval --final: published and hidden workloads, a fresh seed unless --seed
  bool include_hidden = false;  // bench: the experts run on every workload
};

// The agent takes the options that its run records (run.json) or that belong to the machine; the
// output, repetition and progress flags are the evaluating subcommands' own.
enum class RunOptionsFor { evaluation, agent };

void add_run_options(CLI::App& command, RunOptions& options, RunOptionsFor use = RunOptionsFor::evaluation);

// The settings of the command's evaluations on `device`; an error naming the flag for a value out of range.
EvalSettings eval_settings(const RunOptions& options, Device device);

// What the environment (eval/environment.hpp) is made from; its notes go to stderr.
EnvironmentOptions environment_options(const RunOptions& options, const Context& context);

// The observer of --progress: text or JSON lines on stderr, or nothing.
std::unique_ptr<EvalObserver> progress_observer(const RunOptions& options);

// Once per command, on stderr: the cpu device runs the smoke tier of `tasks` unless workloads are named.
void say_smoke_tier(const std::vector<const Task*>& tasks, const EvalSettings& settings);

}  // namespace d2k
