#include "agent/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "core/error.hpp"

namespace d2k::agent {
namespace {

// The holder's pid as it wrote it into the lock file; "unknown" when it has not yet (a race of
// microseconds) or the file holds something else.
std::string holder_of(int fd) {
  char buffer[32] = {};
  const auto n = ::pread(fd, buffer, sizeof buffer - 1, 0);
  std::string text(buffer, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return "unknown";
  return text;
}

}  // namespace

RunLock::RunLock(const std::filesystem::path& run_dir) {
  const auto file = run_dir / "run.lock";
  // O_CLOEXEC: the workers and compilers this process starts must not inherit the lock and keep it
  // after a kill of the run.
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("{}: cannot open the run's lock file {}: {}", run_dir.string(), file.string(), std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const auto holder = holder_of(fd_);
    ::close(fd_);
    fd_ = -1;
    if (error == EWOULDBLOCK)
      fail("{}: the run is in use by process {} (it holds {}); wait for it to end or stop it before resuming",
           run_dir.string(), holder, file.string());
    fail("{}: cannot lock {}: {}", run_dir.string(), file.string(), std::strerror(error));
  }
  const auto pid = fmt::format("{}\n", ::getpid());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size()))
    fail("{}: cannot write the pid into {}: {}", run_dir.string(), file.string(), std::strerror(errno));
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor drops the lock
}

}  // namespace d2k::agent
