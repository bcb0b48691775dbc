#include "worker/leftovers.hpp"

#include <fmt/format.h>
#include <link.h>

#include <array>
#include <filesystem>
#include <set>
#include <string_view>

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
// Python's: ctypes (native calls from a Triton solution) and numpy's core.
constexpr std::array<std::string_view, 14> kForbiddenLibraries = {
    "libtorch", "libc10", "libcublas", "libcudnn", "libcufft", "libcusparse", "libcusolver",
    "libcurand", "libnccl", "libcutlass", "libtriton", "libmkl", "_ctypes", "_multiarray_umath"};

// The Triton runtime's own folder (triton/): its libtriton is allowed for a Triton solution, from there only.
std::string& allowed_triton_dir() {
  static std::string dir;
  return dir;
}

}  // namespace

void allow_triton_from(const std::string& triton_dir) { allowed_triton_dir() = triton_dir.ends_with('/') ? triton_dir : triton_dir + "/"; }

std::optional<std::string> forbidden_library_loaded() {
  for (const std::string& path : loaded_objects()) {
    const std::string file = fs::path(path).filename().string();
    for (std::string_view name : kForbiddenLibraries) {
      if (file.rfind(name, 0) != 0) continue;
      if (name == "libtriton" && !allowed_triton_dir().empty() && path.starts_with(allowed_triton_dir())) continue;
      return fmt::format("loaded {} ({}); a solution may use no library that does the task's work (torch, cuBLAS, "
                         "cuDNN, ...)",
                         file, path);
    }
  }
  return std::nullopt;
}

// A solution may do its work in threads of its own, but none may outlive the call: a thread left
// running can compute the outputs after the call returned (or while the next call is timed), where no
// timer sees it.
std::optional<std::string> leftover_threads(int baseline, const char* entry) {
  const auto left = threads_left(baseline);
  if (!left) return std::nullopt;
  return fmt::format("left {} thread(s) running after {} returned; work must be done, and its threads ended, within "
                     "the call",
                     *left, entry);
}

}  // namespace d2k
