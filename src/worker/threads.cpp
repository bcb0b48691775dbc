#include "worker/threads.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <thread>

#include "core/error.hpp"

namespace d2k {
namespace {

constexpr const char* kStatus = "/proc/self/status";

// How long threads_left waits for a thread that was joined to leave the kernel's count. pthread_join
// returns when the kernel clears the thread's tid (at mm_release, early in its exit); the count drops
// a little later, when the exiting thread is released (__exit_signal). tests/worker/test_threads.cpp
// measures it (JoinedThreadsLeaveWithinTheGrace): on the 2-core build machine at a load of about 10,
// the first reading after a join was already clean in every one of 300 joins (in each of eleven
// runs), so threads_left took one reading: at most 0.34 ms when preempted. 2 ms is far above that, and
// it is paid only when a thread really is left.
constexpr auto kThreadGrace = std::chrono::microseconds(2000);
constexpr auto kFirstPause = std::chrono::microseconds(20);

std::atomic<int> legacy_baseline{-1};

}  // namespace

// Why /proc/self/status and not a walk of /proc/self/task: the "Threads:" line is one counter the
// kernel keeps for the thread group (signal->nr_threads), read in one open/read/close; a thread leaves
// it at the same moment it leaves /proc/self/task (both in __exit_signal). The directory walk takes a
// getdents call per batch of entries, can see a thread that starts or ends during the walk counted or
// not, and costs more the more threads there are. Both see every thread however it was created. The
// cost is the kernel's (a plain open/read, no allocation): 37 us per reading on the 2-core build
// machine at a load of about 10 (JoinedThreadsLeaveWithinTheGrace prints it), where walking
// /proc/self/task of 9 threads took 26 us and reading /proc/self/stat 31 us.
int kernel_thread_count() {
  const int fd = ::open(kStatus, O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open {}: {}", kStatus, std::strerror(errno));
  char text[8192];
  std::size_t size = 0;
  while (size < sizeof text) {
    const ssize_t n = ::read(fd, text + size, sizeof text - size);
    if (n > 0) {
      size += static_cast<std::size_t>(n);
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      const int error = errno;
      ::close(fd);
      fail("cannot read {}: {}", kStatus, std::strerror(error));
    }
  }
  ::close(fd);
  const std::string_view status(text, size);
  constexpr std::string_view kField = "\nThreads:";
  const std::size_t at = status.find(kField);
  if (at == std::string_view::npos) fail("{} has no 'Threads:' line ({} bytes read)", kStatus, size);
  std::size_t i = at + kField.size();
  while (i < status.size() && (status[i] == ' ' || status[i] == '\t')) ++i;
  long count = 0;
  std::size_t digits = 0;
  for (; i < status.size() && status[i] >= '0' && status[i] <= '9' && digits < 9; ++i, ++digits)
    count = count * 10 + (status[i] - '0');
  if (digits == 0 || i >= status.size() || status[i] != '\n' || count < 1)
    fail("{}: 'Threads:' is not a count of at least 1: '{}'", kStatus,
         status.substr(at + 1, std::min<std::size_t>(status.find('\n', at + 1) - at - 1, 40)));
  return static_cast<int>(count);
}

std::optional<int> threads_left(int baseline) {
  int now = kernel_thread_count();
  if (now <= baseline) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + kThreadGrace;
  for (auto pause = kFirstPause;; pause *= 2) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= decltype(left)::zero()) return now - baseline;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, left));
    now = kernel_thread_count();
    if (now <= baseline) return std::nullopt;
  }
}

void start_counting_threads() { legacy_baseline.store(kernel_thread_count()); }

int threads_running() {
  const int baseline = legacy_baseline.load();
  if (baseline < 0) return 0;
  return threads_left(baseline).value_or(0);
}

}  // namespace d2k
