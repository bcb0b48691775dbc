// Solutions: finding their files and building them into a shared object that exports the C ABI
// (include/d2k/solution.h). Builds are content-addressed: the same sources, ABI header, command and
// compiler give the same cache entry, whether the build succeeded or failed.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "runner/sandbox.hpp"

namespace d2k {

// triton: Python with @triton.jit kernels and a launcher (docs/abi.md, "Triton solutions"); it runs on the
// cuda device only, in the worker's embedded CPython.
enum class Language { cuda, cpp, triton };

std::string_view name_of(Language language);

struct Solution {
  std::string name;  // the folder's name, or the file's stem
  std::filesystem::path dir;
  Language language = Language::cuda;
  std::vector<std::filesystem::path> sources;  // sorted
  std::vector<std::filesystem::path> headers;  // sorted; empty for a single-file solution
  std::string entry;                           // triton: the module that defines launch (a file's stem)
};

// A .cu (cuda), .cpp/.cc (cpp) or .py (triton) file, or a folder whose .cu, .cpp/.cc or .py files are the
// sources (not recursive), with its .h/.hpp/.cuh files as headers. A Triton folder's entry module is
// solution.py, or its only .py file; .py files beside .cu or .cpp/.cc files are not sources. Throws
// d2k::Error for a missing path, another file type, or a folder holding both .cu and .cpp/.cc files or
// no source.
Solution load_solution(const std::filesystem::path& path);

struct BuildOptions {
  Device device = Device::cuda;
  std::filesystem::path cache_dir;
  std::filesystem::path abi_include_dir;  // holds d2k/solution.h
  // The pinned CUTLASS/CuTe headers (holds cute/ and cutlass/; cutlass_include_dir() finds them): cuda
  // solutions see them as a system include, read-only in the sandbox. Empty: none. Headers only; nothing
  // is linked.
  std::filesystem::path cutlass_include_dir;
  std::string nvcc = "nvcc";
  std::string cxx = "c++";
  std::string cuda_arch = "sm_90a";
  double timeout_seconds = 300;
  // The sandbox compilers run in (its mode and launcher; build_sandbox adds the paths and limits).
  // Unset: no sandbox and the full environment, for callers that compile trusted code.
  std::optional<Sandbox> sandbox;
  // triton: the pinned Triton's version (runner/triton.hpp), part of the cache key. Empty: not found,
  // and a Triton solution does not build.
  std::string triton_version;
  std::string triton_missing;  // why, when triton_version is empty
};

// Where the CUTLASS headers scripts/setup installs are for the d2k tree `root`: $D2K_CUTLASS_DIR when set,
// else <root>/.deps/cutlass/include; empty when that folder holds no cute/ and cutlass/ (not installed).
std::filesystem::path cutlass_include_dir(const std::filesystem::path& root);

struct BuildResult {
  bool ok = false;
  std::filesystem::path library;  // the shared object, when ok
  std::string log;                // the compiler's output, or why nothing was compiled
  std::string command;            // what ran (or would have run), for a person to repeat
  bool cached = false;            // the cache already held this build
  bool timed_out = false;         // the compiler ran past timeout_seconds (never cached)
  double seconds = 0;             // wall time of this call
  std::string hash;               // the cache key; empty when nothing was compiled
};

// Builds (or finds in the cache) a solution. Failures of the solution (a compile error, a timeout, a
// language that does not match the device) come back as a result with ok = false; a harness that
// is set up wrong (no ABI header, an unusable cache folder) throws d2k::Error.
BuildResult build_solution(const Solution& solution, const BuildOptions& options);

}  // namespace d2k
