#include "sandbox/policy.hpp"

#include <algorithm>

namespace d2k::sandbox {

std::vector<std::string> system_read_paths() {
  return {"/usr",           "/bin",           "/sbin",           "/lib",
          "/lib32",         "/lib64",         "/libx32",         "/etc/ld.so.cache",
          "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives"};
}

bool Applied::has(const std::string& ns) const {
  return std::find(namespaces.begin(), namespaces.end(), ns) != namespaces.end();
}

std::vector<std::string> Applied::strict_failures(const Policy& policy) const {
  std::vector<std::string> failures;
  if (!network_isolated()) failures.push_back("no network isolation (neither a network namespace nor seccomp)");
  if (!filesystem_isolated()) failures.push_back("no file isolation (neither a mount namespace nor Landlock)");
  if (policy.processes > 0 && !process_limit) failures.push_back("no process limit");
  return failures;
}

std::string Applied::summary() const {
  auto join = [](const std::vector<std::string>& items) {
    std::string text;
    for (const auto& item : items) text += (text.empty() ? "" : ", ") + item;
    return text;
  };
  std::vector<std::string> layers;
  if (!namespaces.empty()) layers.push_back("namespaces (" + join(namespaces) + ")");
  if (filesystem_view) layers.push_back(private_proc ? "new root" : "new root (host /proc)");
  if (landlock_fs || landlock_net) {
    std::string what = landlock_fs && landlock_net ? "files, tcp" : landlock_fs ? "files" : "tcp";
    layers.push_back("landlock abi " + std::to_string(landlock_abi) + " (" + what + ")");
  }
  if (seccomp) layers.push_back("seccomp");
  if (!limits.empty()) layers.push_back("limits (" + join(limits) + ")");
  std::string text = layers.empty() ? "no isolation" : join(layers);
  if (!missing.empty()) text += "; not applied: " + join(missing);
  return text;
}

}  // namespace d2k::sandbox
