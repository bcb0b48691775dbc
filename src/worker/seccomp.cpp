#include "worker/seccomp.hpp"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/error.hpp"

namespace d2k {

#if defined(__x86_64__)
namespace {

constexpr uint32_t kAllow = SECCOMP_RET_ALLOW;
constexpr uint32_t kRefuse = SECCOMP_RET_ERRNO | EPERM;
// clone3 passes its flags in memory the filter cannot read, so it cannot tell a thread from a process:
// ENOSYS makes glibc (2.34+) fall back to clone, whose flags the filter does read.
constexpr uint32_t kNoSys = SECCOMP_RET_ERRNO | ENOSYS;

// Refused whatever their arguments. A kernel solution computes inside d2k_run and returns; none of
// these has a place in that, and each is a way to get code running, or memory written, after the call
// returned (while the harness flushes the L2, copies, compares) or to undo the worker's checks.
constexpr int kRefused[] = {
    // Timers and alarms: their signal (or SIGEV_THREAD thread) runs solution code between the calls.
    // The CUDA runtime and driver need none once the context exists.
    SYS_timer_create, SYS_timer_settime, SYS_setitimer, SYS_alarm,
    // Processes: a fork, a vfork, an exec'd helper, or posix_spawn (clone with CLONE_VM|CLONE_VFORK)
    // would work outside the calls, out of reach of the thread count. Threads go through clone below.
    SYS_fork, SYS_vfork, SYS_execve, SYS_execveat,
    // Consuming signals through a descriptor is the other half of a handler: with no timer and no
    // handler left, nothing honest reads one.
    SYS_signalfd, SYS_signalfd4,
    // Asynchronous I/O: the kernel (io_uring's SQPOLL thread and io-wq workers, linked timeouts, Linux
    // AIO) completes a read into memory after the call returned, e.g. precomputed outputs landing in a
    // host output buffer during the untimed flush. No kernel solution does file I/O in a call.
    SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register, SYS_io_setup, SYS_io_submit,
    // A filter of the solution's own could answer the worker's reads of /proc/self/status through a
    // user-notification listener (hiding threads), or fail the worker's checks on purpose. Filters only
    // ever add refusals, so the worker's own stays in force; the solution just may not add one.
    SYS_seccomp,
    // Setting or slewing the time: adjtimex can change CLOCK_MONOTONIC's rate, the worker's wall clock.
    // The sandbox drops CAP_SYS_TIME already; this keeps it so with --sandbox off under root.
    SYS_settimeofday, SYS_clock_settime, SYS_adjtimex, SYS_clock_adjtime,
};

// Left allowed on purpose (what CUDA's runtime and driver need after initialization, or what is inert
// once handlers and timers are gone): mmap, mprotect, munmap, madvise, ioctl, futex, clone with
// CLONE_THREAD, sched_*, nanosleep, timerfd_* (a readable descriptor, nothing runs when it fires),
// rt_sigprocmask, kill/tgkill (a signal with no handler can only end the process), sigaltstack
// queries, perf_event_open (CUPTI may use it), getrandom, membarrier, rseq.

using Program = std::vector<sock_filter>;

sock_filter statement(uint16_t code, uint32_t k) { return BPF_STMT(code, k); }
sock_filter jump(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) { return BPF_JUMP(code, k, jt, jf); }
sock_filter ret(uint32_t action) { return statement(BPF_RET | BPF_K, action); }

// The low and high 32-bit words of argument `i` (x86-64 is little-endian).
sock_filter load_arg_low(int i) {
  return statement(BPF_LD | BPF_W | BPF_ABS, static_cast<uint32_t>(offsetof(seccomp_data, args) + 8 * i));
}
sock_filter load_arg_high(int i) {
  return statement(BPF_LD | BPF_W | BPF_ABS, static_cast<uint32_t>(offsetof(seccomp_data, args) + 8 * i + 4));
}
sock_filter load_nr() { return statement(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)); }

// Appends "if nr == `nr`: `body`", where `body` ends in a return on every path.
void on_syscall(Program& program, int nr, const Program& body) {
  if (body.size() > 255) fail("seccomp: the rule for syscall {} is {} instructions, over a jump's reach", nr, body.size());
  program.push_back(load_nr());
  program.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, static_cast<uint8_t>(body.size())));
  program.insert(program.end(), body.begin(), body.end());
}

// Refused when the pointer argument `i` is not null (seccomp sees the pointer, never what it points to).
Program refuse_non_null(int i) {
  return {load_arg_low(i),
          jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 2),
          load_arg_high(i),
          jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0),
          ret(kRefuse),
          ret(kAllow)};
}

// Refused when the descriptor in argument `i` is one of `fds`. Descriptors are unsigned int in the
// kernel: only the low word counts, whatever the caller put in the high one.
// Refused when argument i is one of its descriptors, for each (i, descriptors) given.
Program refuse_fds(const std::vector<std::pair<int, std::vector<int>>>& rules) {
  Program body;
  for (const auto& [i, fds] : rules) {
    body.push_back(load_arg_low(i));
    for (int fd : fds) {
      body.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(fd), 0, 1));
      body.push_back(ret(kRefuse));
    }
  }
  body.push_back(ret(kAllow));
  return body;
}

Program refuse_fd(int i, const std::vector<int>& fds) { return refuse_fds({{i, fds}}); }

// close_range(first, last, flags): refused when [first, last] holds one of `fds` (flags or not: a
// CLOEXEC range is harmless without exec, but no honest solution asks for one).
Program refuse_fd_range(const std::vector<int>& fds) {
  Program body;
  for (int fd : fds) {
    const auto k = static_cast<uint32_t>(fd);
    body.push_back(load_arg_low(0));
    body.push_back(jump(BPF_JMP | BPF_JGT | BPF_K, k, 3, 0));  // first > fd: not in the range
    body.push_back(load_arg_low(1));
    body.push_back(jump(BPF_JMP | BPF_JGE | BPF_K, k, 0, 1));  // last >= fd: in it
    body.push_back(ret(kRefuse));
  }
  body.push_back(ret(kAllow));
  return body;
}

// The gate on writes to the evidence descriptor: a write to it passes only from the worker's own
// instruction (the instruction pointer seccomp reports is the one after `syscall`).
Program gate_writes(int arg, const EvidenceGate& gate) {
  const auto ip = static_cast<uint32_t>(offsetof(seccomp_data, instruction_pointer));
  return {load_arg_low(arg),
          jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(gate.fd), 1, 0),
          ret(kAllow),  // another descriptor
          statement(BPF_LD | BPF_W | BPF_ABS, ip),
          jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(gate.writer), 0, 3),
          statement(BPF_LD | BPF_W | BPF_ABS, ip + 4),
          jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(gate.writer >> 32), 0, 1),
          ret(kAllow),
          ret(kRefuse)};
}

Program filter(const std::vector<int>& protected_fds, const std::optional<EvidenceGate>& gate) {
  Program program = {
      statement(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      ret(kRefuse),  // the i386 entry points (int 0x80) number fork, alarm, ... differently
      load_nr(),
      jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1),
      ret(kRefuse),  // x32 numbers: the same calls under another bit
  };
  for (int nr : kRefused) on_syscall(program, nr, {ret(kRefuse)});
  on_syscall(program, SYS_clone3, {ret(kNoSys)});
  // clone: threads only. A clone(CLONE_VM) child that is not a thread shares the memory but not the
  // thread group, so the thread count would not see it. The kernel reads the low 32 bits of the flags.
  on_syscall(program, SYS_clone,
             {load_arg_low(0), jump(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1), ret(kAllow), ret(kRefuse)});
  // A handler (SIGALRM, SIGSEGV on a guard page, SIGIO from an O_ASYNC pipe) runs solution code at a
  // moment the solution does not own. Reading the current disposition (act null) stays allowed.
  on_syscall(program, SYS_rt_sigaction, refuse_non_null(1));
  // An alternate stack only matters to a handler; querying it (ss null) stays allowed.
  on_syscall(program, SYS_sigaltstack, refuse_non_null(0));
  // Installing a filter through prctl is the same as seccomp(2) above.
  on_syscall(program, SYS_prctl,
             {load_arg_low(0), jump(BPF_JMP | BPF_JEQ | BPF_K, PR_SET_SECCOMP, 0, 1), ret(kRefuse), ret(kAllow)});
  if (!protected_fds.empty() || gate) {
    // The channels: closed or replaced, the worker's evidence would go nowhere or somewhere else.
    on_syscall(program, SYS_close, refuse_fd(0, protected_fds));
    // With a gate, the evidence descriptor may not be the source of a copy either (see below).
    std::vector<std::pair<int, std::vector<int>>> dups = {{1, protected_fds}};
    if (gate) dups.push_back({0, {gate->fd}});
    on_syscall(program, SYS_dup2, refuse_fds(dups));
    on_syscall(program, SYS_dup3, refuse_fds(dups));
    on_syscall(program, SYS_close_range, refuse_fd_range(protected_fds));
  }
  if (gate) {
    // Every way to put bytes into a pipe, by the argument that names the descriptor written.
    for (int nr : {SYS_write, SYS_writev, SYS_pwrite64, SYS_pwritev, SYS_pwritev2, SYS_sendto, SYS_sendmsg,
                   SYS_sendmmsg, SYS_sendfile, SYS_vmsplice})
      on_syscall(program, nr, gate_writes(0, *gate));
    on_syscall(program, SYS_tee, gate_writes(1, *gate));
    on_syscall(program, SYS_splice, gate_writes(2, *gate));
    on_syscall(program, SYS_copy_file_range, gate_writes(2, *gate));
    // A copy of the descriptor would be written through unchecked (dup2 and dup3 from it are refused
    // above; dup and fcntl copy it to a new number).
    on_syscall(program, SYS_dup, refuse_fd(0, {gate->fd}));
    on_syscall(program, SYS_fcntl,
               {load_arg_low(1), jump(BPF_JMP | BPF_JEQ | BPF_K, F_DUPFD, 1, 0),
                jump(BPF_JMP | BPF_JEQ | BPF_K, F_DUPFD_CLOEXEC, 0, 3), load_arg_low(0),
                jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(gate->fd), 0, 1), ret(kRefuse), ret(kAllow)});
  }
  program.push_back(ret(kAllow));
  return program;
}

}  // namespace

void forbid_outside_work(const std::vector<int>& protected_fds, std::optional<EvidenceGate> gate) {
  for (int fd : protected_fds)
    if (fd < 0) fail("seccomp: protected descriptor {} is not a descriptor", fd);
  if (gate && (gate->fd < 0 || gate->writer == 0)) fail("seccomp: an evidence gate needs a descriptor and an address");
  Program program = filter(protected_fds, gate);
  if (program.size() > BPF_MAXINSNS) fail("seccomp: the filter is {} instructions, over {}", program.size(), BPF_MAXINSNS);
  sock_fprog fprog{static_cast<unsigned short>(program.size()), program.data()};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("seccomp: PR_SET_NO_NEW_PRIVS: {}", std::strerror(errno));
  // TSYNC: every thread of the process, not only this one (a callback of the CUDA runtime runs on a
  // thread the runtime started during set-up). A positive result names a thread that could not join.
  const long result = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &fprog);
  if (result < 0) fail("seccomp: installing the worker's filter: {}", std::strerror(errno));
  if (result > 0) fail("seccomp: thread {} could not take the worker's filter (it has a filter of its own)", result);
}

#else

void forbid_outside_work(const std::vector<int>&, std::optional<EvidenceGate>) {
  fail("seccomp: the worker's filter names x86-64 syscalls; this machine is another architecture");
}

#endif

}  // namespace d2k
