#include "worker/threads.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace d2k {
namespace {

constexpr const char* kStatus = "/proc/self/status";
constexpr const char* kTasks = "/proc/self/task";

// PF_EXITING (include/linux/sched.h): set at the start of do_exit, before the thread's memory is let
// go and its tid cleared, which is what wakes pthread_join. A thread with it never runs user code again.
constexpr unsigned long kExiting = 0x4;

// Reads a small /proc file into `text`; its size, or -errno.
long read_proc(const char* path, char* text, std::size_t capacity) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  std::size_t size = 0;
  while (size < capacity) {
    const ssize_t n = ::read(fd, text + size, capacity - size);
    if (n > 0) {
      size += static_cast<std::size_t>(n);
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      const int error = errno;
      ::close(fd);
      return -error;
    }
  }
  ::close(fd);
  return static_cast<long>(size);
}

// Whether a thread's stat line says it is exiting. The name (comm, in parentheses) is the thread's own
// to choose, parentheses and digits included ("x) R 0 0 0 0 0 4" would pose as flags): the fields are
// counted from the last ')'. After it: state ppid pgrp session tty_nr tpgid flags.
bool exiting(std::string_view stat, const std::string& path) {
  const std::size_t close = stat.rfind(')');
  if (close == std::string_view::npos) fail("{}: no ')' after the thread's name", path);
  std::size_t at = close + 1;
  for (int field = 0; field < 7; ++field) {
    while (at < stat.size() && stat[at] == ' ') ++at;
    if (field == 6) break;
    while (at < stat.size() && stat[at] != ' ') ++at;
  }
  unsigned long flags = 0;
  std::size_t digits = 0;
  for (; at < stat.size() && stat[at] >= '0' && stat[at] <= '9'; ++at, ++digits) flags = flags * 10 + (stat[at] - '0');
  if (digits == 0) fail("{}: no flags field", path);
  return (flags & kExiting) != 0;
}

// The threads of this process that are not exiting.
int live_threads() {
  DIR* tasks = ::opendir(kTasks);
  if (tasks == nullptr) fail("cannot list {}: {}", kTasks, std::strerror(errno));
  int live = 0;
  char text[1024];
  while (const dirent* entry = ::readdir(tasks)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    const std::string path = std::string(kTasks) + "/" + entry->d_name + "/stat";
    const long size = read_proc(path.c_str(), text, sizeof text);
    if (size == -ENOENT || size == -ESRCH || size == 0) continue;  // released since the listing
    if (size < 0) {
      ::closedir(tasks);
      fail("cannot read {}: {}", path, std::strerror(static_cast<int>(-size)));
    }
    live += exiting(std::string_view(text, static_cast<std::size_t>(size)), path) ? 0 : 1;
  }
  ::closedir(tasks);
  return live;
}

}  // namespace

// Why /proc/self/status and not a walk of /proc/self/task: the "Threads:" line is one counter the
// kernel keeps for the thread group (signal->nr_threads), read in one open/read/close; a thread leaves
// it at the same moment it leaves /proc/self/task (both in __exit_signal). The directory walk takes a
// getdents call per batch of entries, can see a thread that starts or ends during the walk counted or
// not, and costs more the more threads there are. Both see every thread however it was created. The
// cost is the kernel's (a plain open/read, no allocation): 37 us per reading on the 2-core build
// machine at a load of about 10 (JoinedThreadsAreNotLeft prints it), where walking /proc/self/task of
// 9 threads took 26 us and reading /proc/self/stat 31 us. The walk is kept for when the count is above
// the baseline, where each thread's flags are needed anyway.
int kernel_thread_count() {
  char text[8192];
  const long size = read_proc(kStatus, text, sizeof text);
  if (size < 0) fail("cannot read {}: {}", kStatus, std::strerror(static_cast<int>(-size)));
  const std::string_view status(text, static_cast<std::size_t>(size));
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
  if (kernel_thread_count() <= baseline) return std::nullopt;
  const int live = live_threads();
  if (live <= baseline) return std::nullopt;
  return live - baseline;
}

}  // namespace d2k
