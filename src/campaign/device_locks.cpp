#include "campaign/device_locks.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.hpp"

namespace d2k::campaign {

namespace {

double seconds_since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

DeviceLocks::DeviceLocks(std::filesystem::path dir) : dir_(std::move(dir)) {
  if (!dir_.empty()) std::filesystem::create_directories(dir_);
}

DeviceLocks::~DeviceLocks() {
  if (journal_fd_ >= 0) ::close(journal_fd_);
}

void DeviceLocks::journal_to(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail("{}: cannot open the device locks' journal: {}", file.string(), std::strerror(errno));
  if (journal_fd_ >= 0) ::close(journal_fd_);
  journal_fd_ = fd;
}

void DeviceLocks::acquire(int device, bool exclusive) {
  std::unique_lock lock(mutex_);
  auto& slot = slots_[device];
  if (exclusive) {
    ++slot.writers_waiting;
    changed_.wait(lock, [&] { return !slot.writer && slot.readers == 0; });
    --slot.writers_waiting;
    slot.writer = true;
  } else {
    // Waiting writers go first: checks queue behind a benchmark rather than starve it.
    changed_.wait(lock, [&] { return !slot.writer && slot.writers_waiting == 0; });
    ++slot.readers;
  }
}

void DeviceLocks::release(int device, bool exclusive) {
  {
    std::lock_guard lock(mutex_);
    auto& slot = slots_[device];
    if (exclusive) slot.writer = false;
    else --slot.readers;
  }
  changed_.notify_all();
}

std::shared_ptr<void> DeviceLocks::hold(int device, bool exclusive) {
  acquire(device, exclusive);
  int fd = -1;
  if (!dir_.empty()) {
    const auto file = dir_ / ("device-" + std::to_string(device) + ".lock");
    fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int error = errno;
      release(device, exclusive);
      fail("{}: cannot open the device lock: {}", file.string(), std::strerror(error));
    }
    while (::flock(fd, exclusive ? LOCK_EX : LOCK_SH) != 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      release(device, exclusive);
      fail("{}: flock: {}", file.string(), std::strerror(error));
    }
  }
  // The handle's deleter writes the journal's line, drops the flock (closing its descriptor) and then the
  // in-process lock.
  const double acquired = seconds_since_epoch();
  return std::shared_ptr<void>(reinterpret_cast<void*>(static_cast<intptr_t>(fd + 2)), [this, device, exclusive, fd, acquired](void*) {
    if (journal_fd_ >= 0) {
      const auto line = fmt::format("{{\"device\": {}, \"exclusive\": {}, \"acquired\": {:.6f}, \"released\": {:.6f}, \"pid\": {}}}\n",
                                    device, exclusive, acquired, seconds_since_epoch(), ::getpid());
      // One write per line (O_APPEND): lines of several writers never interleave. A journal that cannot
      // be written loses the line, never the hold's release.
      [[maybe_unused]] const auto written = ::write(journal_fd_, line.data(), line.size());
    }
    if (fd >= 0) ::close(fd);
    release(device, exclusive);
  });
}

std::function<std::shared_ptr<void>(bool)> DeviceLocks::for_device(int device) {
  return [this, device](bool exclusive) { return hold(device, exclusive); };
}

}  // namespace d2k::campaign
