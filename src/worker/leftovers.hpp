// What a call may leave behind in the worker's process and must not: threads still running, libraries
// that do the task's work. Checked after every call; a finding rejects the solution.
#pragma once

#include <optional>
#include <string>

namespace d2k {

// Why the process is not as the solution found it, or nothing: more threads than `baseline` that can
// still run (worker/threads.hpp) after `entry` (the solution's function just called) returned, a library
// loaded that does the task's work.
std::optional<std::string> leftover_threads(int baseline, const char* entry = "d2k_run");
std::optional<std::string> forbidden_library_loaded();
// A Triton solution: Triton's own libtriton is allowed when it is loaded from this folder (its triton/).
void allow_triton_from(const std::string& triton_dir);

}  // namespace d2k
