// The threads of the worker's process, as the kernel counts them (integrity.md, threat 18). A solution
// may use threads inside a call, but none may outlive it: a thread still there after d2k_run returned
// works while no timer runs. Counting what the kernel reports sees every thread however it was made
// (std::thread, libc's own pthread_create found with dlsym, a raw clone); an interposed pthread_create
// saw only the first. Processes that share the memory are refused outright (seccomp.hpp).
#pragma once

#include <optional>

namespace d2k {

// The threads of this process now: the "Threads:" line of /proc/self/status (threads.cpp says why that
// file). Throws d2k::Error when the file cannot be read or has no such line, never a made-up count.
int kernel_thread_count();

// Threads above `baseline` (the count taken once the worker's own and the runtime's threads had all
// started) that can still run code; nothing when there are none. A thread that was joined may stay
// in the kernel's count a moment after pthread_join returned; it is then already exiting (PF_EXITING
// in /proc/self/task/<tid>/stat) and can never run user code again, so it is not counted. No waiting:
// a grace period would be time for a detached thread to finish its work after the call, untimed.
// One reading of /proc/self/status when the count is at the baseline; a walk of /proc/self/task
// (a reading per thread) only when it is above. Throws d2k::Error when /proc cannot be read.
std::optional<int> threads_left(int baseline);

}  // namespace d2k
