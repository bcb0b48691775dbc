#include "campaign/device_locks.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace d2k::campaign {

DeviceLocks::DeviceLocks(std::filesystem::path dir) : dir_(std::move(dir)) {
  if (!dir_.empty()) std::filesystem::create_directories(dir_);
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
  // The handle's deleter drops the flock (closing its descriptor) and then the in-process lock.
  return std::shared_ptr<void>(reinterpret_cast<void*>(static_cast<intptr_t>(fd + 2)), [this, device, exclusive, fd](void*) {
    if (fd >= 0) ::close(fd);
    release(device, exclusive);
  });
}

std::function<std::shared_ptr<void>(bool)> DeviceLocks::for_device(int device) {
  return [this, device](bool exclusive) { return hold(device, exclusive); };
}

}  // namespace d2k::campaign
