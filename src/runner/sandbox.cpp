#include "runner/sandbox.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <thread>

namespace fs = std::filesystem;

namespace d2k {
namespace {

constexpr long kGiB = 1l << 30;

fs::path canonical_or_same(const fs::path& path) {
  std::error_code error;
  fs::path real = fs::canonical(path, error);
  return error ? fs::absolute(path).lexically_normal() : real;
}

bool under_usr(const fs::path& path) {
  auto text = path.string();
  return text.starts_with("/usr/");
}

// RLIMIT_CPU counts every thread of a process: a backstop for the wall-clock timeout that a process
// using all the cores for the whole timeout still stays under.
double cpu_backstop(double timeout_seconds) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return std::ceil(timeout_seconds) * cores + 10;
}

}  // namespace

std::string_view name_of(SandboxMode mode) {
  switch (mode) {
    case SandboxMode::strict: return "strict";
    case SandboxMode::best_effort: return "best-effort";
    case SandboxMode::off: return "off";
  }
  return "off";
}

std::optional<SandboxMode> parse_sandbox_mode(std::string_view text) {
  if (text == "strict") return SandboxMode::strict;
  if (text == "best-effort") return SandboxMode::best_effort;
  if (text == "off") return SandboxMode::off;
  return std::nullopt;
}

Sandbox build_sandbox(const Sandbox& base, const fs::path& compiler, const fs::path& abi_include_dir,
                      const fs::path& build_dir, double timeout_seconds, const fs::path& cutlass_include_dir) {
  Sandbox sandbox = base;
  sandbox.read.push_back(abi_include_dir);
  // Its real path: a symlinked install must not widen what is readable to the link's whole target tree.
  if (!cutlass_include_dir.empty()) sandbox.read.push_back(canonical_or_same(cutlass_include_dir));
  // A toolkit installed outside /usr (e.g. /opt/cuda): its whole prefix, bin/ and its neighbours.
  fs::path found = compiler;
  if (!compiler.is_absolute() && compiler.string().find('/') == std::string::npos) {
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    for (std::size_t begin = 0; begin <= dirs.size();) {
      std::size_t end = std::min(dirs.find(':', begin), dirs.size());
      fs::path candidate = fs::path(dirs.substr(begin, end - begin)) / compiler;
      if (candidate.is_absolute() && ::access(candidate.c_str(), X_OK) == 0) {
        found = candidate;
        break;
      }
      begin = end + 1;
    }
  }
  if (found.is_absolute()) {
    fs::path real = canonical_or_same(found);
    if (!under_usr(real)) sandbox.read.push_back(real.parent_path().parent_path());
  }
  sandbox.write.push_back(build_dir);
  sandbox.home = build_dir;
  sandbox.gpu = false;
  // The address-space cap stops a template explosion from taking the machine's memory.
  sandbox.cpu_seconds = cpu_backstop(timeout_seconds);
  sandbox.file_bytes = 1 * kGiB;
  sandbox.processes = 256;
  sandbox.memory_bytes = 16 * kGiB;
  return sandbox;
}

Sandbox worker_sandbox(const Sandbox& base, const fs::path& worker, const fs::path& library,
                       const fs::path& request_dir, bool gpu, double timeout_seconds) {
  Sandbox sandbox = base;
  sandbox.read.push_back(worker);
  sandbox.read.push_back(library.parent_path());  // the build's cache entry: the library and its log
  if (gpu) sandbox.read.push_back("/sys");         // the driver reads the PCI topology there
  sandbox.write.push_back(request_dir);
  sandbox.home = request_dir;
  sandbox.gpu = gpu;
  sandbox.cpu_seconds = cpu_backstop(timeout_seconds);
  sandbox.file_bytes = 16 * kGiB;  // the largest output tensor written back
  sandbox.processes = 256;         // the CUDA runtime's threads count too
  sandbox.memory_bytes = 0;
  return sandbox;
}

std::vector<std::string> sandboxed_argv(const Sandbox& sandbox, const std::vector<std::string>& argv,
                                        const fs::path& cwd) {
  std::vector<std::string> out = {sandbox.launcher.string(),
                                  sandbox.mode == SandboxMode::strict ? "--strict" : "--best-effort", "--system"};
  for (const auto& path : sandbox.read) out.insert(out.end(), {"--ro", fs::absolute(path).lexically_normal().string()});
  for (const auto& path : sandbox.write) out.insert(out.end(), {"--rw", fs::absolute(path).lexically_normal().string()});
  if (sandbox.gpu) out.push_back("--gpu");
  if (!sandbox.namespaces) out.push_back("--without-namespaces");
  if (!sandbox.home.empty()) out.insert(out.end(), {"--home", fs::absolute(sandbox.home).lexically_normal().string()});
  if (!cwd.empty()) out.insert(out.end(), {"--cwd", fs::absolute(cwd).lexically_normal().string()});
  if (sandbox.cpu_seconds > 0) out.insert(out.end(), {"--cpu-seconds", fmt::format("{}", static_cast<long>(std::ceil(sandbox.cpu_seconds)))});
  if (sandbox.file_bytes > 0) out.insert(out.end(), {"--file-bytes", std::to_string(sandbox.file_bytes)});
  if (sandbox.processes > 0) out.insert(out.end(), {"--processes", std::to_string(sandbox.processes)});
  if (sandbox.memory_bytes > 0) out.insert(out.end(), {"--memory-bytes", std::to_string(sandbox.memory_bytes)});
  out.push_back("--");
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

bool passes_to_sandbox(std::string_view name) {
  static constexpr std::array<std::string_view, 14> kNames = {
      "PATH", "LANG", "LANGUAGE", "LC_ALL", "TZ", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
      "CUDA_HOME", "CUDA_PATH", "CUDA_MODULE_LOADING", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
      "CUDA_LAUNCH_BLOCKING"};
  for (auto known : kNames)
    if (name == known) return true;
  return name.starts_with("LC_");
}

}  // namespace d2k
