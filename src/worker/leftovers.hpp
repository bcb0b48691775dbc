// What a call may leave behind in the worker's process and must not: threads still running, libraries
// that do the task's work. Checked after every call; a finding rejects the solution.
#pragma once

#include <optional>
#include <string>

namespace d2k {

// The threads of this process as the kernel lists them.
int thread_count();

// Why the process is not as the solution found it (more threads than `baseline`, a forbidden library
// loaded); nothing when it is.
std::optional<std::string> leftover_threads(int baseline);
std::optional<std::string> forbidden_library_loaded();

}  // namespace d2k
