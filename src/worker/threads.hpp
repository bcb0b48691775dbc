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
// started) still there after a short, bounded wait; nothing when the count is back at or below it.
// The wait is for threads that were joined but not yet released by the kernel (threads.cpp: at most
// kThreadGraceMicros, and only when the first reading is above the baseline).
std::optional<int> threads_left(int baseline);

// TODO(issue 10, lead): remove both once worker.cpp calls kernel_thread_count() and threads_left().
// Kept so that today's worker still builds: start_counting_threads() takes the baseline,
// threads_running() is threads_left(baseline) (a /proc read: not free inside a timed region).
void start_counting_threads();
int threads_running();

}  // namespace d2k
