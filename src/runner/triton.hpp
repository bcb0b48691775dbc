// Triton solutions on the orchestrator's side (docs/abi.md, "Triton solutions"): finding the pinned Triton
// and the Python it runs on, and the warm-up that compiles a solution's kernels ahead of its worker.
//
// The worker embeds CPython and never compiles: before every worker, the warm-up runs the solution's
// launcher once in a sandboxed python3 with no GPU, on tensor objects of the workload's shapes whose
// pointers are placeholders, and compiles each kernel it launches for the target (sm_90a) into a Triton
// cache in the build's cache entry, instead of launching it (and, for the cuda device, Triton's C launcher
// stubs). Triton keys its cache by the kernel's source, its specialization, the target and its own
// version, so a warm-up whose kernels are already there costs the interpreter's start only.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/worker_protocol.hpp"
#include "runner/sandbox.hpp"

namespace d2k {

// The Triton d2k pins: the version the GPU machine's PyTorch (2.11.0) ships with.
inline constexpr std::string_view kTritonVersion = "3.6.0";
// The compute capability Triton compiles for: d2k's cuda target, sm_90a (Triton adds the "a" at 90).
inline constexpr int kTritonCapability = 90;

struct TritonSetup {
  std::filesystem::path python;     // the interpreter (its real path, not a venv's link)
  std::filesystem::path home;       // sys.base_prefix: where its standard library lives
  std::filesystem::path libpython;  // the shared libpython the worker embeds (empty: none)
  std::filesystem::path site;       // the folder that holds triton/
  std::string version;              // triton.__version__
  std::string python_version;       // e.g. "3.12.3"
};

// Finds Python and Triton: the interpreter is $D2K_PYTHON, else python3 on PATH; Triton is the one in
// $D2K_TRITON_SITE, else <root>/.deps/triton (scripts/setup), else the interpreter's own. Returns nothing
// and says why when there is no Triton, or not the pinned version. Asked once per process and root.
std::optional<TritonSetup> find_triton(const std::filesystem::path& root, std::string& why);

struct WarmupSpec {
  std::filesystem::path src_dir;           // the build's copy of the solution's .py files
  std::string entry;                       // the module that defines launch
  std::vector<std::string> modules;        // every module of the solution's
  std::vector<WireTensor> inputs, outputs;  // the workload's, as the worker gets them
  std::vector<WireScalar> scalars;
  std::filesystem::path cache_dir;         // the Triton cache it fills (writable)
  std::filesystem::path scratch_dir;       // a folder for its request and runtime (writable)
  bool build_stubs = false;                // also Triton's C launcher stubs (needs gcc and libcuda)
  double timeout_seconds = 300;
  std::optional<Sandbox> sandbox;
};

struct WarmupResult {
  bool ok = false;
  // When not ok: "refused" (an import the guard refused: the solution is rejected), "compile" (Triton could
  // not compile a kernel), "load" or "run" (the solution's Python failed), "harness" (the warm-up itself).
  std::string kind;
  std::string message;
  nlohmann::json kernels;  // [{kernel, hash, sm, cubin_bytes}], what was compiled
  std::string log;         // the interpreter's output
  double seconds = 0;
};

WarmupResult triton_warmup(const TritonSetup& setup, const WarmupSpec& spec);

// The worker's part of the request for this setup and warm-up.
WirePython wire_python(const TritonSetup& setup, const WarmupSpec& spec);

// What the sandbox of a process that runs this Python must let it read: the standard library's home
// (when outside /usr) and Triton's package folder alone (not the site-packages around it, which may hold
// torch).
std::vector<std::filesystem::path> triton_read_paths(const TritonSetup& setup);

}  // namespace d2k
