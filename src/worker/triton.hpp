// A Triton solution in the worker (docs/abi.md, "Triton solutions"): an embedded CPython runs d2k's Triton
// runtime (src/triton/d2k_triton.py), which binds the worker's buffers to tensor objects and calls the
// solution's launcher. The worker reaches it through the same entry points as a shared object's
// (SolutionLibrary), so every step around a call (second draw, repeat, rotation, guards, clocks) is the one
// CUDA solutions get.
#pragma once

#include <optional>
#include <string>

#include "core/worker_protocol.hpp"
#include "worker/library.hpp"

namespace d2k {

// Loads libpython (request.python->library), starts the interpreter and imports Triton, filling what
// Triton runs a program for at first use. The worker's own set-up: before its seccomp filter, before any of
// the solution's code. Throws d2k::Error.
void start_triton(const WirePython& python);

// Imports the solution's entry module under the import guard and checks its launcher. The entry points
// call into it. `refused` is set when the solution imported what the guard refuses (a library); `error`
// when the import failed otherwise. Throws d2k::Error for the harness's own failures.
struct TritonLoad {
  SolutionLibrary library;
  std::optional<std::string> refused, error;
};
TritonLoad load_triton(const WorkerRequest& request);

// The first import of the solution's the guard refused, in any call so far (a launcher that imports torch
// inside a call, and catches the error, is still rejected).
std::optional<std::string> triton_refused_import();

}  // namespace d2k
