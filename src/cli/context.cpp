#include "cli/context.hpp"

#include <cstdlib>

#include "core/error.hpp"

namespace d2k {
namespace {

std::filesystem::path cache_root() {
  if (const char* dir = std::getenv("D2K_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "d2k";
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "d2k";
  return std::filesystem::temp_directory_path() / "d2k-cache";
}

}  // namespace

Context make_context(const std::string& root_option) {
  Context context;
  if (!root_option.empty()) {
    context.root = root_option;
  } else if (const char* env = std::getenv("D2K_ROOT"); env && *env) {
    context.root = env;
  } else {
    context.root = D2K_ROOT_DIR;
  }
  context.root = std::filesystem::absolute(context.root);
  context.tasks_dir = context.root / "tasks";
  if (!std::filesystem::is_directory(context.tasks_dir))
    fail("no tasks folder at {} (set --root or D2K_ROOT to the d2k source tree)", context.tasks_dir.string());
  context.cache_dir = cache_root();
  std::filesystem::create_directories(context.cache_dir);
  return context;
}

}  // namespace d2k
