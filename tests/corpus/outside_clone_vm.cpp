// Round 2, class 5 (threats 18, 4 and 5): work done between the timed calls by a child process that
// shares the worker's memory but is not one of its threads (so /proc/self/task never lists it). In
// d2k_prepare it starts the child with clone3(CLONE_VM) (a raw system call: seccomp cannot read clone3's
// flags, which are in memory) and, when that is refused, with clone(CLONE_VM | SIGCHLD). The child polls
// every 50 us and computes the outputs of every rotated copy whose outputs were just poisoned
// (between_calls.h); the timed call then finds them written and returns at once. It ends when the worker
// does. Each refusal is its error; the checked calls compute honestly.
// Expected: runtime_error, "Operation not permitted" (or "Function not implemented" for clone3, which a
// filter refuses whole): clone without CLONE_THREAD is refused. Were it allowed, the timed calls would
// return in nanoseconds: below the speed of light.
#include "between_calls.h"  // an honest quant/fp8_group_quant, and the work between calls
#include "timed_calls.h"

#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

namespace {

constexpr size_t kStackBytes = size_t{1} << 20;
long parent = 0;

// Runs in the child, on its own stack, with the worker's memory (and its thread pointer: no libc call
// that keeps state per thread).
int work_between_calls(void*) {
  const timespec pause{0, 50000};
  while (::syscall(SYS_getppid) == parent) {
    between::tick();
    ::syscall(SYS_nanosleep, &pause, nullptr);
  }
  ::syscall(SYS_exit, 0);
  return 0;
}

#if defined(__x86_64__) && defined(SYS_clone3)
// clone3 with CLONE_VM: the child starts on the new stack with nothing to return to, so it calls the
// function itself and exits. Returns the child's id or -errno.
long clone3_vm(void* stack, int (*fn)(void*)) {
  clone_args args{};
  args.flags = CLONE_VM;
  args.exit_signal = SIGCHLD;
  args.stack = reinterpret_cast<uint64_t>(stack);
  args.stack_size = kStackBytes;
  register long rax asm("rax") = SYS_clone3;
  register clone_args* rdi asm("rdi") = &args;
  register size_t rsi asm("rsi") = sizeof args;
  register int (*r12)(void*) asm("r12") = fn;
  asm volatile(
      "syscall\n\t"
      "test %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "xor %%edi, %%edi\n\t"
      "call *%%r12\n\t"
      "mov $60, %%eax\n\t"
      "xor %%edi, %%edi\n\t"
      "syscall\n\t"
      "1:\n\t"
      : "+r"(rax)
      : "r"(rdi), "r"(rsi), "r"(r12)
      : "rcx", "r11", "memory");
  return rax;
}
#endif

}  // namespace

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  parent = ::syscall(SYS_getpid);
  void* stack = ::mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "mmap of a stack: %s", std::strerror(errno));
    return 1;
  }
  std::string refused;
#if defined(__x86_64__) && defined(SYS_clone3)
  const long child = clone3_vm(stack, work_between_calls);
  if (child > 0) return 0;
  refused = std::string("clone3(CLONE_VM): ") + std::strerror(int(-child)) + "; ";
#endif
  if (::clone(work_between_calls, static_cast<char*>(stack) + kStackBytes, CLONE_VM | SIGCHLD, nullptr) > 0) return 0;
  refused += std::string("clone(CLONE_VM | SIGCHLD): ") + std::strerror(errno);
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "no work between the calls: %s", refused.c_str());
  return 1;
}

extern "C" int d2k_run(const d2k_call* call) { return between::run(call, timing_started(call)); }
