#include "eval/ncu.hpp"

#include <unistd.h>

#include <cstdlib>
#include <sstream>

namespace d2k {

namespace fs = std::filesystem;

std::optional<fs::path> find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return std::nullopt;
  std::stringstream folders(path);
  std::string folder;
  while (std::getline(folders, folder, ':')) {
    if (folder.empty()) continue;
    const auto candidate = fs::path(folder) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

std::optional<NcuWrap> make_ncu_wrap(const std::string& metrics, int launch_count, const fs::path& report) {
  const auto ncu = find_on_path("ncu");
  if (!ncu) return std::nullopt;
  NcuWrap wrap;
  wrap.ncu = *ncu;
  wrap.args = {"--csv", "--print-units", "base", "--launch-count", std::to_string(launch_count), "--metrics", metrics};
  wrap.report = report;
  // The CUDA toolkit's `bin/ncu` is a script that looks for its installation beside the toolkit or under
  // /opt/nvidia; both are made visible (read-only), with the folder the name on PATH resolves to.
  std::error_code error;
  const fs::path real = fs::canonical(*ncu, error);
  const fs::path resolved = error ? *ncu : real;
  wrap.read.push_back(resolved.parent_path().parent_path());
  if (ncu->parent_path() != resolved.parent_path()) wrap.read.push_back(ncu->parent_path());
  if (fs::is_directory("/opt/nvidia", error)) wrap.read.push_back("/opt/nvidia");
  return wrap;
}

}  // namespace d2k
