// Round 2, class 5 (threats 18 and 16): a child process that outlives the worker. In d2k_prepare it tries
// every way to start one: fork(), the raw fork system call, clone(SIGCHLD) without CLONE_VM, clone3
// without CLONE_VM, and posix_spawn of a shell (clone(CLONE_VM | CLONE_VFORK) and exec). The child (or the
// shell) inherits every descriptor, the evidence pipe among them; it waits until the worker has ended and
// then writes forged frames (`samples` claiming 1 us, `end`; guessed format, forge_frames.h) into every
// one, after the worker's own `end`. Every call computes honestly. If no way worked, the refusals are its
// error.
// Expected: runtime_error, "Operation not permitted" (seccomp refuses fork, vfork, clone without
// CLONE_THREAD and exec). Had a child been started, the sandbox kills it with the worker; had it written
// after `end`: rejected, "the evidence stream carried a frame the worker did not write".
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "forge_frames.h"

extern char** environ;

namespace {

long worker = 0;

[[noreturn]] void child() {
  while (::getppid() == worker) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const forge::Token zeros(forge::kTokenBytes, 0);
  std::string forged = forge::samples_frame(1000, zeros, 10, 0.001);
  forged += forge::end_frame(1001, zeros);
  forge::write_everywhere(forged);
  ::_exit(0);
}

int child_entry(void*) { child(); }

// Started: the child's id; refused: -1 and a line in `refused`.
long start(const char* how, long pid, std::string& refused) {
  if (pid == 0) child();
  if (pid < 0) refused += std::string(how) + ": " + std::strerror(errno) + "; ";
  return pid;
}

}  // namespace

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  worker = ::getpid();
  std::string refused;
  if (start("fork", ::fork(), refused) > 0) return 0;
  if (start("the fork system call", ::syscall(SYS_fork), refused) > 0) return 0;
  static char stack[1 << 16];
  if (start("clone(SIGCHLD)", ::clone(child_entry, stack + sizeof stack, SIGCHLD, nullptr), refused) > 0) return 0;
#ifdef SYS_clone3
  clone_args args{};
  args.exit_signal = SIGCHLD;
  if (start("clone3", ::syscall(SYS_clone3, &args, sizeof args), refused) > 0) return 0;
#endif
  // A shell that waits for the worker to end and then writes into every descriptor it inherited.
  const std::string script = "while kill -0 " + std::to_string(worker) +
                             " 2>/dev/null; do sleep 0.01; done; for fd in /proc/self/fd/*; do "
                             "printf 'D2KF forged after the end' > \"$fd\" 2>/dev/null; done";
  const char* argv[] = {"/bin/sh", "-c", script.c_str(), nullptr};
  pid_t shell = 0;
  const int error = ::posix_spawn(&shell, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ);
  if (error == 0) return 0;
  refused += std::string("posix_spawn(/bin/sh): ") + std::strerror(error);
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "no child process: %s", refused.c_str());
  return 1;
}

extern "C" int d2k_run(const d2k_call* call) {
  quantize(call);
  return 0;
}
