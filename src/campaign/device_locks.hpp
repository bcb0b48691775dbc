// One lock per device index: shared for untimed work (checks may run side by side), exclusive for timing
// (nothing else on the device while the clock runs). Within a process a writer-preferring lock per
// index, so that a stream of checks cannot starve a benchmark; across processes (two campaigns or two
// shards on one node, a `d2k eval` in another shell that takes the same lock) an flock on
// <dir>/device-<index>.lock, LOCK_SH or LOCK_EX, taken after the in-process one. The kernel drops an
// flock when its holder dies in any way, kill -9 included.
//
// With a journal, every hold is appended to it when released, one JSON object per line: {"device",
// "exclusive", "acquired", "released" (seconds since the epoch, after the lock was taken and before it
// is dropped), "pid"}. tools/device_holds.py checks a journal: no exclusive hold may overlap any other
// hold of its device. Several processes may append to one journal (one write per line, O_APPEND); a
// hold whose process was killed is not in it.
#pragma once

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace d2k::campaign {

class DeviceLocks {
 public:
  // `dir` empty: in-process locks only.
  explicit DeviceLocks(std::filesystem::path dir = {});
  DeviceLocks(const DeviceLocks&) = delete;
  DeviceLocks& operator=(const DeviceLocks&) = delete;
  ~DeviceLocks();

  // Blocks until the device's lock is held; released when the handle is dropped.
  std::shared_ptr<void> hold(int device, bool exclusive);

  // For EvalEnvironment::hold_device: the lock of one device index. `this` must outlive it.
  std::function<std::shared_ptr<void>(bool exclusive)> for_device(int device);

  // Appends every hold released from now on to `file` (created when missing).
  void journal_to(const std::filesystem::path& file);

 private:
  struct Slot {
    int readers = 0;
    bool writer = false;
    int writers_waiting = 0;
  };
  void acquire(int device, bool exclusive);
  void release(int device, bool exclusive);

  std::filesystem::path dir_;
  int journal_fd_ = -1;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int, Slot> slots_;
};

}  // namespace d2k::campaign
