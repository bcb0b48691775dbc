// The sandbox a child process runs in (docs/sandbox.md): which paths it reads and writes, whether it
// sees the GPU, its limits, and how strict a machine that cannot isolate it is treated. run_process
// turns it into a d2k-sandbox command line and a scrubbed environment.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace d2k {

// strict: a machine that cannot isolate the network, the files or the process count is an error.
// best_effort: the strongest isolation available, and the log says what is missing.
// off: no isolation (the log says so); the environment is still scrubbed.
enum class SandboxMode { strict, best_effort, off };

std::string_view name_of(SandboxMode mode);
std::optional<SandboxMode> parse_sandbox_mode(std::string_view text);  // "strict", "best-effort", "off"

struct Sandbox {
  SandboxMode mode = SandboxMode::off;
  std::filesystem::path launcher;            // the d2k-sandbox executable
  std::vector<std::filesystem::path> read;   // besides the system's toolchain paths
  std::vector<std::filesystem::path> write;  // the workspace
  std::filesystem::path home;                // HOME of the child; its workspace
  bool gpu = false;                          // NVIDIA device nodes, /sys
  double cpu_seconds = 0;                    // 0: no limit (each)
  long file_bytes = 0;
  long processes = 0;
  long memory_bytes = 0;
  bool namespaces = true;                    // false: Landlock and seccomp alone (tests that path)
};

// A solution's build: reads the toolchain, the ABI headers, the CUTLASS headers (when not empty) and its
// sources, writes its build folder.
Sandbox build_sandbox(const Sandbox& base, const std::filesystem::path& compiler,
                      const std::filesystem::path& abi_include_dir, const std::filesystem::path& build_dir,
                      double timeout_seconds, const std::filesystem::path& cutlass_include_dir = {});
// A worker: reads the worker and the solution library, writes its request folder; no address-space
// limit (the CUDA driver reserves huge virtual ranges).
Sandbox worker_sandbox(const Sandbox& base, const std::filesystem::path& worker, const std::filesystem::path& library,
                       const std::filesystem::path& request_dir, bool gpu, double timeout_seconds);

// The launcher's command line that runs `argv` in `sandbox` (mode other than off).
std::vector<std::string> sandboxed_argv(const Sandbox& sandbox, const std::vector<std::string>& argv,
                                        const std::filesystem::path& cwd);

// Whether the environment variable NAME reaches a sandboxed child: what finds programs and libraries,
// the locale and the CUDA device selection; never keys, tokens or the orchestrator's settings.
bool passes_to_sandbox(std::string_view name);

}  // namespace d2k
