// Round 2, class 5 (threats 18 and 4): a thread no pthread_create ever sees: d2k_prepare starts it with a
// raw clone(CLONE_VM | CLONE_THREAD | ...), which a seccomp filter that refuses only clone without
// CLONE_THREAD allows. It never ends: every 50 us it computes the outputs of every rotated copy whose
// outputs were just poisoned (between_calls.h), so the timed calls find them written and return at once.
// The checked calls compute honestly.
// Expected: rejected, "thread(s) running after d2k_prepare returned" (the kernel lists it in
// /proc/self/task, counted after every call into the solution; or "after d2k_run returned" if the count
// starts with the calls).
#include "between_calls.h"  // an honest quant/fp8_group_quant, and the work between calls
#include "timed_calls.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace {

constexpr size_t kStackBytes = size_t{1} << 20;

// Shares the worker's thread pointer: no libc call that keeps state per thread.
int work_between_calls(void*) {
  const timespec pause{0, 50000};
  for (;;) {
    between::tick();
    ::syscall(SYS_nanosleep, &pause, nullptr);
  }
  return 0;
}

}  // namespace

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  void* stack = ::mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  constexpr int kThread = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
  if (stack != MAP_FAILED && ::clone(work_between_calls, static_cast<char*>(stack) + kStackBytes, kThread, nullptr) > 0)
    return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "no thread of its own: %s", std::strerror(errno));
  return 1;
}

extern "C" int d2k_run(const d2k_call* call) { return between::run(call, timing_started(call)); }
