#include "eval/environment.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include "core/error.hpp"
#include "eval/device_select.hpp"
#include "runner/process.hpp"
#include "timing/ceilings.hpp"
#include "timing/device_info.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;

// d2k-worker and d2k-sandbox are built beside the executable that uses them.
fs::path bin_dir(const EnvironmentOptions& options) {
  if (!options.bin_dir.empty()) return options.bin_dir;
  std::error_code error;
  auto exe = fs::read_symlink("/proc/self/exe", error);
  return error ? fs::current_path() : exe.parent_path();
}

void note(const EnvironmentOptions& options, const std::string& line) {
  if (options.log) *options.log << line << '\n';
}

}  // namespace

Device resolve_device(const EnvironmentOptions& options) {
  if (options.device == "auto") {
    if (auto why = cuda_unavailable()) {
      note(options, fmt::format("d2k: {}; running on the cpu device (a test seam: its times are not GPU numbers)", *why));
      return Device::cpu;
    }
    return Device::cuda;
  }
  const auto device = parse_device(options.device);
  if (!device) fail("--device: unknown device '{}' (auto, cuda or cpu)", options.device);
  if (*device == Device::cuda)
    if (auto why = cuda_unavailable()) fail("--device cuda: {}", *why);
  return *device;
}

Ceilings device_ceilings(Device device, const EnvironmentOptions& options) {
  fs::create_directories(options.cache_dir);
  return cached_ceilings(device, options.cache_dir, options.refresh_ceilings, options.log);
}

Sandbox probe_sandbox(Device device, const EnvironmentOptions& options) {
  const auto mode = parse_sandbox_mode(options.sandbox);
  if (!mode) fail("--sandbox: unknown mode '{}' (strict, best-effort or off)", options.sandbox);
  Sandbox sandbox;
  sandbox.mode = *mode;
  sandbox.launcher = bin_dir(options) / "d2k-sandbox";
  if (sandbox.mode == SandboxMode::off) {
    note(options, "d2k: sandbox off: builds and workers run without isolation (the environment is still scrubbed)");
    return sandbox;
  }
  if (!fs::exists(sandbox.launcher)) fail("the sandbox launcher is missing: {}", sandbox.launcher.string());
  // `true` run the way a worker runs: whatever the launcher cannot set up here shows in its output.
  const auto scratch = fs::temp_directory_path() / fmt::format("d2k-sandbox-check-{}", ::getpid());
  fs::create_directories(scratch);
  ProcessSpec spec;
  spec.argv = {"true"};
  spec.cwd = scratch;
  spec.timeout_seconds = 30;
  spec.sandbox = worker_sandbox(sandbox, sandbox.launcher, scratch / "none", scratch, device == Device::cuda, 30);
  const auto result = run_process(spec);
  std::error_code ignored;
  fs::remove_all(scratch, ignored);
  std::string said = result.output;
  while (!said.empty() && said.back() == '\n') said.pop_back();
  if (!result.ok()) {
    fail("--sandbox {}: this machine cannot run the sandbox ({}): {}\n(run d2k-sandbox --probe to see what the kernel "
         "allows; --sandbox best-effort runs with what is available)",
         name_of(sandbox.mode), result.describe(), said);
  }
  note(options, fmt::format("d2k: sandbox {}: {}", name_of(sandbox.mode),
                            said.starts_with("d2k-sandbox: ") ? said.substr(13) : said));
  return sandbox;
}

fs::path find_worker(const EnvironmentOptions& options) {
  auto worker = bin_dir(options) / "d2k-worker";
  if (!fs::exists(worker)) fail("the worker executable is missing: {}", worker.string());
  return worker;
}

EvalEnvironment make_environment(const EnvironmentOptions& options) {
  EvalEnvironment environment;
  environment.device = resolve_device(options);
  environment.root = options.root;
  environment.build_cache = options.cache_dir / "builds";
  environment.scratch_dir = options.cache_dir / "scratch";
  fs::create_directories(environment.scratch_dir);
  environment.worker = find_worker(options);
  environment.sandbox = probe_sandbox(environment.device, options);
  environment.device_name = device_name(environment.device);
  environment.ceilings = device_ceilings(environment.device, options);
  return environment;
}

EvalEnvironment make_build_environment(const EnvironmentOptions& options) {
  EvalEnvironment environment;
  // cuda named: builds for it, usable here or not; auto, cpu and a wrong name as every command has them.
  environment.device = options.device == "cuda" ? Device::cuda : resolve_device(options);
  environment.root = options.root;
  environment.build_cache = options.cache_dir / "builds";
  // Compilers get no GPU: the sandbox is tried as a cpu worker's, which a machine without a GPU runs.
  environment.sandbox = probe_sandbox(Device::cpu, options);
  environment.device_name = std::string(name_of(environment.device));
  return environment;
}

BuildOptions solution_build_options(const EvalEnvironment& environment, const Solution& solution, double timeout_seconds,
                                    std::optional<TritonSetup>* triton) {
  BuildOptions options;
  options.device = environment.device;
  options.cache_dir = environment.build_cache;
  options.abi_include_dir = environment.root / "include";
  options.cutlass_include_dir = cutlass_include_dir(environment.root);
  options.timeout_seconds = timeout_seconds;
  // The evaluator's sandbox: outside it a solution could #include any host file (the task's task.toml
  // names the hidden workloads) and read it back in the compiler's log.
  options.sandbox = environment.sandbox;
  if (solution.language == Language::triton && environment.device == Device::cuda) {
    std::string why;
    auto setup = find_triton(environment.root, why);
    if (setup) options.triton_version = setup->version;
    else options.triton_missing = why;
    if (triton) *triton = std::move(setup);
  }
  return options;
}

}  // namespace d2k
