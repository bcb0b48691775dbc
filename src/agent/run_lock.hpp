// The lock of a run folder: run.lock, held with flock(2) for as long as a process drives the run, so
// that a second `d2k agent --resume` of a live run is refused instead of driving it twice (duplicate
// requests and records, a folder that no longer resumes). The kernel drops the lock when its holder
// exits in any way, kill -9 included, so a dead run never stays locked.
#pragma once

#include <filesystem>

namespace d2k::agent {

class RunLock {
 public:
  // Takes the lock of run_dir (which must exist); throws d2k::Error naming the folder and the pid of
  // the process that holds it.
  explicit RunLock(const std::filesystem::path& run_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace d2k::agent
