// The worker's own seccomp filter (src/worker/seccomp.hpp). Every case runs in a child process of its
// own: the child opens two channel descriptors, installs the filter with them protected, makes one
// call and reports its result and errno through a pipe. A filter cannot be removed, so the test
// process itself never installs one. Where a case could do harm if the filter let it through (a clock
// set as root, a process forked), it is written so that the kernel refuses it anyway, with an errno
// other than the filter's, or so that the new process exits at once.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "worker/evidence_write.hpp"
#include "worker/seccomp.hpp"

extern char** environ;

namespace {

// The channels, where the worker will keep them: high numbers, out of the way of the solution's own.
constexpr int kEvidenceFd = 700;  // the write end of a pipe
constexpr int kControlFd = 701;   // its read end
constexpr int kOtherFd = 702;     // a descriptor that is not protected

struct Outcome {
  long result = 0;
  int error = 0;
  bool installed = false;
};

// Runs `attempt` in a child: with `filtered`, after forbid_outside_work({kEvidenceFd, kControlFd}), with
// the evidence descriptor gated to evidence_write() when `gated`.
Outcome in_child(const std::function<long()>& attempt, bool filtered = true, bool gated = false) {
  int report[2];
  if (::pipe(report) != 0) ADD_FAILURE() << "pipe: " << std::strerror(errno);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(report[0]);
    Outcome outcome;
    int channel[2];
    if (::pipe(channel) == 0 && ::dup2(channel[1], kEvidenceFd) == kEvidenceFd &&
        ::dup2(channel[0], kControlFd) == kControlFd && ::dup2(channel[0], kOtherFd) == kOtherFd) {
      ::close(channel[0]);
      ::close(channel[1]);
      try {
        if (filtered)
          d2k::forbid_outside_work({kEvidenceFd, kControlFd},
                                   gated ? std::optional(d2k::EvidenceGate{kEvidenceFd, d2k::evidence_write_address()})
                                         : std::nullopt);
        outcome.installed = true;
      } catch (const d2k::Error& error) {
        ::dprintf(2, "%s\n", error.what());
      }
    }
    if (outcome.installed) {
      errno = 0;
      outcome.result = attempt();
      outcome.error = errno;
    }
    (void)!::write(report[1], &outcome, sizeof outcome);
    ::_exit(0);
  }
  ::close(report[1]);
  Outcome outcome;
  const ssize_t n = ::read(report[0], &outcome, sizeof outcome);
  ::close(report[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(n, static_cast<ssize_t>(sizeof outcome)) << "the child reported nothing (status " << status << ")";
  EXPECT_TRUE(outcome.installed) << "the filter was not installed";
  return outcome;
}

// A process started by a call that should have been refused ends at once, reporting nothing.
long exit_if_child(long result) {
  if (result == 0) ::_exit(0);
  return result;
}

void expect_refused(const char* what, const std::function<long()>& attempt, int error = EPERM) {
  const Outcome outcome = in_child(attempt);
  EXPECT_EQ(outcome.result, -1) << what;
  EXPECT_EQ(outcome.error, error) << what << ": " << std::strerror(outcome.error);
}

void expect_allowed(const char* what, const std::function<long()>& attempt) {
  const Outcome outcome = in_child(attempt);
  EXPECT_NE(outcome.result, -1) << what << ": " << std::strerror(outcome.error);
}

void on_signal(int) {}

int child_function(void*) { return 0; }

}  // namespace

TEST(Seccomp, RefusesTimersAndAlarms) {
  expect_refused("timer_create", [] {
    timer_t timer;
    return static_cast<long>(::timer_create(CLOCK_MONOTONIC, nullptr, &timer));
  });
  expect_refused("timer_settime", [] {
    itimerspec spec{};
    return ::syscall(SYS_timer_settime, 0, 0, &spec, nullptr);
  });
  expect_refused("setitimer", [] {
    itimerval value{};
    value.it_value.tv_sec = 1000;
    return static_cast<long>(::setitimer(ITIMER_REAL, &value, nullptr));
  });
  expect_refused("alarm", [] { return ::syscall(SYS_alarm, 1000); });
}

TEST(Seccomp, TimersWorkWithoutTheFilter) {
  // The control: the same call succeeds in a child without the filter, so the refusal above is the
  // filter's and not the kernel's.
  const Outcome outcome = in_child(
      [] {
        timer_t timer;
        return static_cast<long>(::timer_create(CLOCK_MONOTONIC, nullptr, &timer));
      },
      false);
  EXPECT_EQ(outcome.result, 0) << std::strerror(outcome.error);
}

TEST(Seccomp, RefusesSignalHandlersButNotQueries) {
  expect_refused("sigaction with a handler", [] {
    struct sigaction action {};
    action.sa_handler = on_signal;
    return static_cast<long>(::sigaction(SIGALRM, &action, nullptr));
  });
  expect_refused("sigaction to SIG_IGN (seccomp sees the pointer only)", [] {
    struct sigaction action {};
    action.sa_handler = SIG_IGN;
    return static_cast<long>(::sigaction(SIGUSR1, &action, nullptr));
  });
  // A pointer whose low 32 bits are zero is still a pointer: the filter checks both words.
  expect_refused("rt_sigaction, act in the high word only",
                 [] { return ::syscall(SYS_rt_sigaction, SIGUSR1, 1ul << 32, nullptr, 8); });
  expect_allowed("sigaction query", [] {
    struct sigaction old {};
    return static_cast<long>(::sigaction(SIGALRM, nullptr, &old));
  });
  expect_refused("sigaltstack", [] {
    static char stack[1 << 16];
    stack_t alternate{};
    alternate.ss_sp = stack;
    alternate.ss_size = sizeof stack;
    return static_cast<long>(::sigaltstack(&alternate, nullptr));
  });
  expect_allowed("sigaltstack query", [] {
    stack_t old{};
    return static_cast<long>(::sigaltstack(nullptr, &old));
  });
  expect_refused("signalfd", [] {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGALRM);
    return static_cast<long>(::signalfd(-1, &mask, 0));
  });
  const Outcome control = in_child(
      [] {
        struct sigaction action {};
        action.sa_handler = on_signal;
        return static_cast<long>(::sigaction(SIGALRM, &action, nullptr));
      },
      false);
  EXPECT_EQ(control.result, 0) << std::strerror(control.error);
}

TEST(Seccomp, RefusesProcessesAndExec) {
  expect_refused("fork", [] { return exit_if_child(::fork()); });
  expect_refused("fork syscall", [] { return exit_if_child(::syscall(SYS_fork)); });
  expect_refused("vfork syscall", [] { return exit_if_child(::syscall(SYS_vfork)); });
  expect_refused("clone without CLONE_THREAD", [] { return exit_if_child(::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0)); });
  expect_refused("clone(CLONE_VM) that is not a thread", [] {
    static char stack[1 << 16];
    return static_cast<long>(::clone(child_function, stack + sizeof stack, CLONE_VM | SIGCHLD, nullptr));
  });
  // The high word of clone's flags is not the kernel's: CLONE_THREAD there does not make a thread.
  expect_refused("clone, CLONE_THREAD only in the high word",
                 [] { return exit_if_child(::syscall(SYS_clone, (static_cast<long>(CLONE_THREAD) << 32) | SIGCHLD, 0, 0, 0, 0)); });
  expect_refused("clone3", [] {
    struct {
      uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
    } args{};
    args.exit_signal = SIGCHLD;
    return exit_if_child(::syscall(SYS_clone3, &args, sizeof args));
  }, ENOSYS);
  expect_refused("execve", [] {
    char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
    return static_cast<long>(::execve("/bin/true", argv, environ));
  });
  expect_refused("execveat", [] {
    char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
    return ::syscall(SYS_execveat, AT_FDCWD, "/bin/true", argv, environ, 0);
  });
  const Outcome spawned = in_child([] {
    pid_t pid = 0;
    char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
    const int error = ::posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, environ);
    errno = error;
    return error == 0 ? 0l : -1l;
  });
  EXPECT_EQ(spawned.result, -1) << "posix_spawn started a process";
}

TEST(Seccomp, RefusesAsynchronousIoAndFiltersOfItsOwn) {
  expect_refused("io_uring_setup", [] {
    unsigned char params[120] = {};
    return ::syscall(SYS_io_uring_setup, 8, params);
  });
  expect_refused("io_setup", [] {
    unsigned long context = 0;
    return ::syscall(SYS_io_setup, 8, &context);
  });
  static sock_filter allow_all[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  expect_refused("seccomp", [] {
    sock_fprog program{1, allow_all};
    return ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program);
  });
  expect_refused("prctl(PR_SET_SECCOMP)", [] {
    sock_fprog program{1, allow_all};
    return static_cast<long>(::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0));
  });
  expect_allowed("another prctl", [] { return static_cast<long>(::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)); });
}

TEST(Seccomp, RefusesSettingTheClocks) {
  // Each is one the kernel would refuse or ignore by itself (CLOCK_MONOTONIC cannot be set: EINVAL; a
  // settimeofday of nothing does nothing; adjtimex with no modes reads), so that nothing changes the
  // machine's time if the filter let one through; EPERM is the filter's answer.
  expect_refused("clock_settime", [] {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<long>(::clock_settime(CLOCK_MONOTONIC, &now));
  });
  expect_refused("settimeofday", [] { return ::syscall(SYS_settimeofday, nullptr, nullptr); });
  expect_refused("adjtimex", [] {
    timex query{};
    return static_cast<long>(::adjtimex(&query));
  });
}

TEST(Seccomp, RefusesOtherArchitecturesNumbers) {
  // getpid under the x32 bit: the kernel answers ENOSYS where x32 is off, the filter EPERM.
  expect_refused("x32 getpid", [] { return ::syscall(0x40000000 | SYS_getpid); });
}

TEST(Seccomp, ProtectsTheChannels) {
  expect_refused("close(evidence)", [] { return static_cast<long>(::close(kEvidenceFd)); });
  expect_refused("close(control)", [] { return static_cast<long>(::close(kControlFd)); });
  // The kernel reads a descriptor's low 32 bits only: the same descriptor with a high word set.
  expect_refused("close, high word set", [] { return ::syscall(SYS_close, (1l << 32) | kEvidenceFd); });
  expect_refused("dup2 onto evidence", [] { return static_cast<long>(::dup2(kOtherFd, kEvidenceFd)); });
  expect_refused("dup3 onto control", [] { return static_cast<long>(::dup3(kOtherFd, kControlFd, O_CLOEXEC)); });
  expect_refused("close_range over both", [] { return ::syscall(SYS_close_range, 3, ~0u, 0); });
  expect_refused("close_range of evidence alone", [] { return ::syscall(SYS_close_range, kEvidenceFd, kEvidenceFd, 0); });
  expect_allowed("close of another descriptor", [] { return static_cast<long>(::close(kOtherFd)); });
  expect_allowed("dup2 from a channel", [] { return static_cast<long>(::dup2(kControlFd, kOtherFd + 1)); });
  expect_allowed("close_range above the channels", [] { return ::syscall(SYS_close_range, kControlFd + 1, ~0u, 0); });
  expect_allowed("close_range below the channels", [] { return ::syscall(SYS_close_range, 100, kEvidenceFd - 1, 0); });
  // The channels still carry data: the worker writes its evidence through them.
  const Outcome written = in_child([] {
    const char sent = 'e';
    char received = 0;
    if (::write(kEvidenceFd, &sent, 1) != 1 || ::read(kControlFd, &received, 1) != 1) return -1l;
    return received == sent ? 0l : -1l;
  });
  EXPECT_EQ(written.result, 0) << std::strerror(written.error);
  const Outcome control = in_child([] { return static_cast<long>(::close(kEvidenceFd)); }, false);
  EXPECT_EQ(control.result, 0) << std::strerror(control.error);
}

// The evidence descriptor takes writes from the worker's one gated instruction only: not from glibc's
// write(), nor through a copy of the descriptor. Other descriptors are untouched.
TEST(Seccomp, TheEvidenceTakesTheWorkersWritesOnly) {
  const auto gated_refused = [](const char* what, const std::function<long()>& attempt) {
    const Outcome outcome = in_child(attempt, true, true);
    EXPECT_EQ(outcome.result, -1) << what;
    EXPECT_EQ(outcome.error, EPERM) << what << ": " << std::strerror(outcome.error);
  };
  const auto gated_allowed = [](const char* what, const std::function<long()>& attempt) {
    const Outcome outcome = in_child(attempt, true, true);
    EXPECT_NE(outcome.result, -1) << what << ": " << std::strerror(outcome.error);
  };
  gated_refused("write", [] { return static_cast<long>(::write(kEvidenceFd, "x", 1)); });
  gated_refused("raw write", [] { return ::syscall(SYS_write, kEvidenceFd, "x", 1); });
  gated_refused("writev", [] {
    iovec part{const_cast<char*>("x"), 1};
    return static_cast<long>(::writev(kEvidenceFd, &part, 1));
  });
  gated_refused("vmsplice", [] {
    iovec part{const_cast<char*>("x"), 1};
    return static_cast<long>(::vmsplice(kEvidenceFd, &part, 1, 0));
  });
  gated_refused("dup", [] { return static_cast<long>(::dup(kEvidenceFd)); });
  gated_refused("fcntl F_DUPFD", [] { return static_cast<long>(::fcntl(kEvidenceFd, F_DUPFD, 0)); });
  gated_refused("fcntl F_DUPFD_CLOEXEC", [] { return static_cast<long>(::fcntl(kEvidenceFd, F_DUPFD_CLOEXEC, 0)); });
  gated_refused("dup2 from evidence", [] { return static_cast<long>(::dup2(kEvidenceFd, kOtherFd + 1)); });
  gated_allowed("the gated write", [] {
    const long n = d2k::evidence_write(kEvidenceFd, "x", 1);
    errno = n < 0 ? static_cast<int>(-n) : 0;
    return n == 1 ? 0l : -1l;
  });
  gated_allowed("write elsewhere", [] { return static_cast<long>(::write(2, "", 0)); });
  gated_allowed("fcntl F_GETFL of evidence", [] { return static_cast<long>(::fcntl(kEvidenceFd, F_GETFL)); });
}

TEST(Seccomp, ThreadsStillWork) {
  // std::thread: glibc tries clone3 first, gets ENOSYS from the filter and falls back to clone with
  // CLONE_THREAD, which is allowed.
  const Outcome threaded = in_child([] {
    std::atomic<int> ran{0};
    std::thread worker([&] { ran = 1; });
    worker.join();
    return ran.load() == 1 ? 0l : -1l;
  });
  EXPECT_EQ(threaded.result, 0);
  // And what the CUDA runtime needs after its set-up: memory maps and protections, futexes, sleeps.
  expect_allowed("mmap, mprotect, munmap", [] {
    void* memory = ::mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return -1l;
    if (::mprotect(memory, 4096, PROT_READ) != 0) return -1l;
    return static_cast<long>(::munmap(memory, 1 << 20));
  });
  expect_allowed("nanosleep", [] {
    timespec pause{0, 1000};
    return static_cast<long>(::nanosleep(&pause, nullptr));
  });
}

TEST(Seccomp, ReachesThreadsStartedBefore) {
  // A thread started before the filter (as the CUDA runtime's are) is bound by it too (TSYNC).
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    std::atomic<int> go{0};
    long result = 0;
    int error = 0;
    std::thread early([&] {
      while (go.load() == 0) std::this_thread::yield();
      timer_t timer;
      result = ::timer_create(CLOCK_MONOTONIC, nullptr, &timer);
      error = errno;
    });
    bool installed = true;
    try {
      d2k::forbid_outside_work({});
    } catch (const d2k::Error&) {
      installed = false;
    }
    go = 1;
    early.join();
    const long message[2] = {installed && result == -1 ? 1l : 0l, error};
    (void)!::write(report[1], message, sizeof message);
    ::_exit(0);
  }
  ::close(report[1]);
  long message[2] = {0, 0};
  EXPECT_EQ(::read(report[0], message, sizeof message), static_cast<ssize_t>(sizeof message));
  ::close(report[0]);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(message[0], 1) << "a thread started before the filter could still create a timer";
  EXPECT_EQ(message[1], EPERM);
}

TEST(Seccomp, RefusesNegativeDescriptors) {
  // In a child all the same: were the check missing, the filter would be installed for good.
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      d2k::forbid_outside_work({-1});
    } catch (const d2k::Error&) {
      ::_exit(0);
    }
    ::_exit(1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "forbid_outside_work accepted descriptor -1";
}
