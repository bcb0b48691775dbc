#include "cli/context.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <random>

#include "core/error.hpp"
#include "core/task_loader.hpp"
#include "eval/device_select.hpp"
#include "eval/ncu.hpp"
#include "runner/process.hpp"
#include "runner/sandbox.hpp"
#include "timing/device_info.hpp"
#include "timing/ceilings.hpp"

namespace d2k {
namespace {

std::filesystem::path self_dir() {
  std::error_code error;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::filesystem::current_path() : exe.parent_path();
}

std::filesystem::path cache_root() {
  if (const char* dir = std::getenv("D2K_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "d2k";
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "d2k";
  return std::filesystem::temp_directory_path() / "d2k-cache";
}

// The sandbox of builds and workers, tried once here: in strict mode a machine that cannot isolate
// them stops the run before anything is evaluated; otherwise the line says what applies.
Sandbox make_sandbox(const std::string& text, Device device) {
  const auto mode = parse_sandbox_mode(text);
  if (!mode) fail("--sandbox: unknown mode '{}' (strict, best-effort or off)", text);
  Sandbox sandbox;
  sandbox.mode = *mode;
  sandbox.launcher = self_dir() / "d2k-sandbox";
  if (sandbox.mode == SandboxMode::off) {
    std::cerr << "d2k: sandbox off: builds and workers run without isolation (the environment is still scrubbed)\n";
    return sandbox;
  }
  if (!std::filesystem::exists(sandbox.launcher)) fail("the sandbox launcher is missing: {}", sandbox.launcher.string());
  const auto scratch = std::filesystem::temp_directory_path() / fmt::format("d2k-sandbox-check-{}", ::getpid());
  std::filesystem::create_directories(scratch);
  ProcessSpec spec;
  spec.argv = {"true"};
  spec.cwd = scratch;
  spec.timeout_seconds = 30;
  spec.sandbox = worker_sandbox(sandbox, sandbox.launcher, scratch / "none", scratch, device == Device::cuda, 30);
  const auto result = run_process(spec);
  std::error_code ignored;
  std::filesystem::remove_all(scratch, ignored);
  std::string said = result.output;
  while (!said.empty() && said.back() == '\n') said.pop_back();
  if (!result.ok()) {
    fail("--sandbox {}: this machine cannot run the sandbox ({}): {}\n(run d2k-sandbox --probe to see what the kernel "
         "allows; --sandbox best-effort runs with what is available)",
         name_of(sandbox.mode), result.describe(), said);
  }
  std::cerr << fmt::format("d2k: sandbox {}: {}\n", name_of(sandbox.mode),
                           said.starts_with("d2k-sandbox: ") ? said.substr(13) : said);
  return sandbox;
}

}  // namespace

Context make_context(const CommonOptions& options) {
  Context context;
  if (!options.root.empty()) {
    context.root = options.root;
  } else if (const char* env = std::getenv("D2K_ROOT"); env && *env) {
    context.root = env;
  } else {
    context.root = D2K_ROOT_DIR;
  }
  context.root = std::filesystem::absolute(context.root);
  context.tasks_dir = context.root / "tasks";
  if (!std::filesystem::is_directory(context.tasks_dir))
    fail("no tasks folder at {} (set --root or D2K_ROOT to the d2k source tree)", context.tasks_dir.string());
  context.cache_dir = cache_root();
  std::filesystem::create_directories(context.cache_dir);
  return context;
}

EvalEnvironment make_environment(const Context& context, const CommonOptions& options) {
  EvalEnvironment environment;
  if (options.device == "auto") {
    if (auto why = cuda_unavailable()) {
      std::cerr << fmt::format("d2k: {}; running on the cpu device (a test seam: its times are not GPU numbers)\n", *why);
      environment.device = Device::cpu;
    } else {
      environment.device = Device::cuda;
    }
  } else if (auto device = parse_device(options.device)) {
    environment.device = *device;
    if (environment.device == Device::cuda)
      if (auto why = cuda_unavailable()) fail("--device cuda: {}", *why);
  } else {
    fail("--device: unknown device '{}' (auto, cuda or cpu)", options.device);
  }
  environment.root = context.root;
  environment.build_cache = context.cache_dir / "builds";
  environment.scratch_dir = context.cache_dir / "scratch";
  std::filesystem::create_directories(environment.scratch_dir);
  environment.worker = self_dir() / "d2k-worker";
  if (!std::filesystem::exists(environment.worker)) fail("the worker executable is missing: {}", environment.worker.string());
  environment.sandbox = make_sandbox(options.sandbox, environment.device);
  environment.device_name = device_name(environment.device);
  environment.ceilings = cached_ceilings(environment.device, context.cache_dir, options.refresh_ceilings, &std::cerr);
  return environment;
}

EvalSettings make_settings(const CommonOptions& options, Device device) {
  EvalSettings eval;
  eval.workloads = options.workloads;
  eval.seed = options.seed;
  eval.include_hidden = options.include_hidden || options.final;
  eval.tier = default_tier(device, options.workloads);
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
  if (options.min_samples < 0) fail("--min-samples: must be at least 1 (or 0 for the default), not {}", options.min_samples);
  if (options.warmup < 0) fail("--warmup: must not be negative, not {}", options.warmup);
  if (options.rotate < 0) fail("--rotate: must not be negative, not {}", options.rotate);
  eval.worker_timeout_seconds = options.timeout;
  if (!options.ncu_report.empty()) {
    if (device != Device::cuda) fail("--ncu-report: Nsight Compute profiles the cuda device, not {}", name_of(device));
    if (options.ncu_launch_count < 1) fail("--ncu-launch-count: must be at least 1, not {}", options.ncu_launch_count);
    eval.ncu = make_ncu_wrap(options.ncu_metrics, options.ncu_launch_count, options.ncu_report);
    if (!eval.ncu) fail("--ncu-report: Nsight Compute (ncu) is not on PATH");
  }
  return eval;
}

std::vector<Task> load_all_tasks(const Context& context) { return load_tasks(context.tasks_dir); }

const Task& find_task(const std::vector<Task>& tasks, const std::string& name) {
  for (const auto& task : tasks)
    if (task.name == name) return task;
  std::string known;
  for (const auto& task : tasks) known += (known.empty() ? "" : ", ") + task.name;
  fail("no task '{}' (known: {})", name, known);
}

}  // namespace d2k
