// Threads as the kernel counts them (src/worker/threads.hpp): every way of making one is counted, a
// thread that is exiting is not, and a joined thread is never taken for one left running. The timing
// tests print what a reading costs, for the numbers quoted in threads.cpp.
#include <dlfcn.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "worker/threads.hpp"

using namespace d2k;
using Clock = std::chrono::steady_clock;

namespace {

int task_entries() {
  int count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++count;
  return count;
}

double micros(Clock::duration duration) { return std::chrono::duration<double, std::micro>(duration).count(); }

// Waits (bounded) until the kernel count is back at `baseline`; returns how long that took.
Clock::duration until_count_is(int baseline) {
  const auto start = Clock::now();
  while (kernel_thread_count() > baseline && Clock::now() - start < std::chrono::seconds(5)) {
  }
  return Clock::now() - start;
}

// A thread made by clone() directly, as a solution that avoids pthread_create would: it shares the
// memory, files and signal handlers, but has no TLS or stack of glibc's. It spins until told to stop.
struct RawThread {
  static constexpr std::size_t kStackBytes = 1 << 16;
  alignas(16) char stack[kStackBytes];
  std::atomic<int> stop{0};
  pid_t tid = 0;  // set by the kernel at start (CLONE_CHILD_SETTID), cleared at exit (CLONE_CHILD_CLEARTID)

  static int body(void* self) {
    auto* thread = static_cast<RawThread*>(self);
    while (thread->stop.load(std::memory_order_relaxed) == 0) {
    }
    return 0;  // glibc's clone wrapper then ends this thread alone (SYS_exit)
  }

  int start() {
    constexpr int kFlags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
                           CLONE_PARENT_SETTID | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID;
    return ::clone(body, stack + kStackBytes, kFlags, this, &tid, nullptr, &tid);
  }

  void finish() {
    stop = 1;
    // The kernel clears tid and wakes this futex when the thread is gone.
    for (pid_t seen = __atomic_load_n(&tid, __ATOMIC_ACQUIRE); seen != 0; seen = __atomic_load_n(&tid, __ATOMIC_ACQUIRE))
      ::syscall(SYS_futex, &tid, FUTEX_WAIT, seen, nullptr, nullptr, 0);
  }
};

}  // namespace

TEST(Threads, KernelCountAgreesWithTheTaskList) {
  const int count = kernel_thread_count();
  EXPECT_GE(count, 1);
  EXPECT_EQ(count, task_entries());
}

TEST(Threads, CountsStdThread) {
  const int baseline = kernel_thread_count();
  std::atomic<bool> release{false};
  std::thread worker([&] {
    while (!release) std::this_thread::sleep_for(std::chrono::microseconds(100));
  });
  EXPECT_EQ(kernel_thread_count(), baseline + 1);
  EXPECT_EQ(threads_left(baseline), 1);
  release = true;
  worker.join();
  EXPECT_EQ(threads_left(baseline), std::nullopt);
}

TEST(Threads, CountsLibcPthreadCreateFoundWithDlsym) {
  // The route that escaped the old interposed pthread_create: libc's own, looked up past the caller.
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  auto create = reinterpret_cast<Create>(::dlsym(RTLD_NEXT, "pthread_create"));
  ASSERT_NE(create, nullptr) << ::dlerror();
  const int baseline = kernel_thread_count();
  static std::atomic<bool> release;
  release = false;
  pthread_t thread{};
  ASSERT_EQ(create(&thread, nullptr,
                   [](void*) -> void* {
                     while (!release) std::this_thread::sleep_for(std::chrono::microseconds(100));
                     return nullptr;
                   },
                   nullptr),
            0);
  EXPECT_EQ(threads_left(baseline), 1);
  release = true;
  ASSERT_EQ(::pthread_join(thread, nullptr), 0);
  EXPECT_EQ(threads_left(baseline), std::nullopt);
}

TEST(Threads, CountsRawCloneThreads) {
  const int baseline = kernel_thread_count();
  auto first = std::make_unique<RawThread>();
  auto second = std::make_unique<RawThread>();
  ASSERT_GT(first->start(), 0) << std::strerror(errno);
  ASSERT_GT(second->start(), 0) << std::strerror(errno);
  EXPECT_EQ(kernel_thread_count(), baseline + 2);
  EXPECT_EQ(threads_left(baseline), 2);
  first->finish();
  second->finish();
  EXPECT_EQ(threads_left(baseline), std::nullopt);
}

TEST(Threads, ALeftThreadIsReportedAtOnce) {
  // No grace period: it would be time for a detached thread to finish the call's work untimed.
  const int baseline = kernel_thread_count();
  std::atomic<bool> release{false};
  std::thread worker([&] {
    while (!release) std::this_thread::sleep_for(std::chrono::microseconds(100));
  });
  const auto start = Clock::now();
  EXPECT_EQ(threads_left(baseline), 1);
  const double took = micros(Clock::now() - start);
  release = true;
  worker.join();
  std::printf("threads_left with a thread still running: %.0f us\n", took);
  EXPECT_LT(took, 50000.0);  // readings only, with room for a loaded machine
}

TEST(Threads, AnExitingThreadIsNotLeft) {
  // A thread that has begun to exit stays in the kernel's count until it is released: a joined thread
  // for a moment, a main thread that exited alone until the whole process ends (a zombie). The
  // latter is the one that can be held still for a test: in a child process the main thread exits,
  // and the thread it left behind asks.
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    const pid_t main_tid = static_cast<pid_t>(::syscall(SYS_gettid));
    std::thread([&] {
      const std::string stat = "/proc/self/task/" + std::to_string(main_tid) + "/stat";
      for (;;) {  // until the main thread is a zombie
        std::ifstream in(stat);
        std::string line;
        std::getline(in, line);
        const std::size_t close = line.rfind(')');
        if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z') break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      int message[2] = {kernel_thread_count(), threads_left(1).value_or(0)};
      (void)!::write(report[1], message, sizeof message);
      ::_exit(0);
    }).detach();
    // The exit system call, not pthread_exit: that unwinds through the test framework's frames.
    for (;;) ::syscall(SYS_exit, 0);
  }
  ::close(report[1]);
  int message[2] = {0, -1};
  EXPECT_EQ(::read(report[0], message, sizeof message), static_cast<ssize_t>(sizeof message));
  ::close(report[0]);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(message[0], 2) << "the exiting main thread should still be in the kernel's count";
  EXPECT_EQ(message[1], 0) << "the exiting main thread was counted as a thread left running";
}

TEST(Threads, AThreadNamedLikeAStatLineIsStillCounted) {
  // A thread's name sits in its stat line; one that spells "exiting" flags must not pass for exiting.
  const int baseline = kernel_thread_count();
  std::atomic<bool> named{false}, release{false};
  std::thread worker([&] {
    ::pthread_setname_np(::pthread_self(), ") R 0 0 0 0 0 4");
    named = true;
    while (!release) std::this_thread::sleep_for(std::chrono::microseconds(100));
  });
  while (!named) std::this_thread::yield();
  EXPECT_EQ(threads_left(baseline), 1);
  release = true;
  worker.join();
}

TEST(Threads, JoinedThreadsAreNotLeft) {
  // What threads_left costs an honest solution: a reading, and after a join the time until the kernel
  // has released the thread (until then it is exiting, and not counted). Measured over many joins;
  // threads_left must find none left after any of them.
  const int baseline = kernel_thread_count();
  constexpr int kReadings = 2000;
  const auto start = Clock::now();
  for (int i = 0; i < kReadings; ++i) kernel_thread_count();
  const double per_reading = micros(Clock::now() - start) / kReadings;

  constexpr int kJoins = 300;
  std::vector<double> release_us, wait_us;
  int clean_at_once = 0;
  for (int i = 0; i < kJoins; ++i) {
    std::thread([] {}).join();
    clean_at_once += kernel_thread_count() <= baseline ? 1 : 0;
    release_us.push_back(micros(until_count_is(baseline)));
  }
  int dirty = 0;
  for (int i = 0; i < kJoins; ++i) {
    std::thread([] {}).join();
    const auto begin = Clock::now();
    if (threads_left(baseline).has_value()) ++dirty;
    wait_us.push_back(micros(Clock::now() - begin));
  }
  std::sort(release_us.begin(), release_us.end());
  std::sort(wait_us.begin(), wait_us.end());
  std::printf("kernel_thread_count: %.1f us per reading. After a join: the first reading was clean %d of %d times; "
              "the count came back in median %.1f us, slowest %.1f us; threads_left took median %.1f us, "
              "slowest %.1f us\n",
              per_reading, clean_at_once, kJoins, release_us[kJoins / 2], release_us.back(), wait_us[kJoins / 2],
              wait_us.back());
  EXPECT_EQ(dirty, 0) << "threads_left saw a joined thread as left";
  EXPECT_LT(per_reading, 1000.0);
}
