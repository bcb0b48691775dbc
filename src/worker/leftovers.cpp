#include "worker/leftovers.hpp"

#include <fmt/format.h>
#include <link.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <set>
#include <string_view>
#include <thread>

#include "worker/threads.hpp"

namespace fs = std::filesystem;

namespace d2k {
namespace {

// The shared objects loaded in this process, by path.
std::set<std::string> loaded_objects() {
  std::set<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0')
          static_cast<std::set<std::string>*>(out)->insert(info->dlpi_name);
        return 0;
      },
      &paths);
  return paths;
}

// Libraries that do a task's work for it (or are the reference's own): a solution that loads one at
// run time, past the build's link line, is calling what the task does not allow. The driver may load
// helpers of its own lazily, so this is a list of what is forbidden, not of what is allowed.
constexpr std::array<std::string_view, 12> kForbiddenLibraries = {
    "libtorch", "libc10", "libcublas", "libcudnn", "libcufft", "libcusparse",
    "libcusolver", "libcurand", "libnccl", "libcutlass", "libtriton", "libmkl"};

}  // namespace

int thread_count() {
  std::error_code error;
  int count = 0;
  for (fs::directory_iterator it("/proc/self/task", error), end; !error && it != end; it.increment(error)) ++count;
  return count;
}

std::optional<std::string> forbidden_library_loaded() {
  for (const std::string& path : loaded_objects()) {
    const std::string file = fs::path(path).filename().string();
    for (std::string_view name : kForbiddenLibraries) {
      if (file.rfind(name, 0) != 0) continue;
      return fmt::format("loaded {} ({}); a solution may use no library that does the task's work (torch, cuBLAS, "
                         "cuDNN, ...)",
                         file, path);
    }
  }
  return std::nullopt;
}

// A solution may do its work in threads of its own, but none may outlive the call: a thread left
// running can compute the outputs after the call returned (or while the next call is timed), where no
// timer sees it. The kernel's list of the process's threads, with a moment's grace for a joined thread
// that the kernel has not yet removed.
std::optional<std::string> leftover_threads(int baseline) {
  if (const int running = threads_running(); running > 0) {
    return fmt::format("left {} thread(s) running after d2k_run returned; work must be done, and its threads "
                       "ended, within the call",
                       running);
  }
  int now = thread_count();
  for (int retry = 0; retry < 2 && now > baseline; ++retry) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    now = thread_count();
  }
  if (now <= baseline) return std::nullopt;
  return fmt::format("left {} thread(s) running after d2k_run returned ({} before the solution was loaded, {} "
                     "after); work must be done, and its threads ended, within the call",
                     now - baseline, baseline, now);
}

}  // namespace d2k
