// What every subcommand needs: where the tasks are, which device, the caches, the worker.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/task.hpp"
#include "eval/evaluator.hpp"

namespace d2k {

struct CommonOptions {
  std::string root;            // --root, else $D2K_ROOT, else the source tree d2k was built from
  std::string device = "auto"; // --device auto|cuda|cpu
  uint64_t seed = 1;
  bool seed_given = false;     // --seed on the command line
  bool final = false;          // published and hidden workloads, a fresh seed unless --seed
  bool include_hidden = false; // the hidden workloads too (bench, final)
  std::vector<std::string> workloads;
  std::string json;            // --json FILE ("-" for stdout)
  bool no_baseline = false;
  double timeout = 120.0;      // seconds per worker
  double max_seconds = 1.0;    // timing budget per workload
  int min_samples = 0;         // timed calls at least, even past max_seconds (0: default_min_samples)
  int warmup = 3;              // untimed calls first
  int repeat = 1;              // evaluate this many times, seeds seed, seed + 1, ...
  double rotate = 3.0;         // input copies hold at least this multiple of the last-level cache (0: one)
  bool refresh_ceilings = false;
  std::string sandbox = "strict";  // --sandbox strict|best-effort|off (docs/sandbox.md)
  // Nsight Compute around each worker (the agent's profile tool; hidden from --help): its report to
  // this file, these metrics, the first N kernels.
  std::string ncu_report;
  std::string ncu_metrics = "gpu__time_duration.sum";
  int ncu_launch_count = 40;
};

struct Context {
  std::filesystem::path root;
  std::filesystem::path tasks_dir;
  std::filesystem::path cache_dir;
};

Context make_context(const CommonOptions& options);
// Resolves `auto` (cuda when a GPU is usable, else cpu, saying why), probes the sandbox, finds the
// worker and reads (or measures) the device's ceilings.
EvalEnvironment make_environment(const Context& context, const CommonOptions& options);
// The settings of the command line's evaluations on `device`.
EvalSettings make_settings(const CommonOptions& options, Device device);
std::vector<Task> load_all_tasks(const Context& context);
const Task& find_task(const std::vector<Task>& tasks, const std::string& name);

}  // namespace d2k
