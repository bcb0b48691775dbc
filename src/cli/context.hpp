// Where the command line finds things: the d2k tree (tasks/, include/) and the cache folder.
#pragma once

#include <filesystem>
#include <string>

namespace d2k {

struct Context {
  std::filesystem::path root;       // --root, else $D2K_ROOT, else the source tree d2k was built from
  std::filesystem::path tasks_dir;  // root/tasks
  std::filesystem::path cache_dir;  // $D2K_CACHE_DIR, else $XDG_CACHE_HOME/d2k, else ~/.cache/d2k
};

// `root_option` is --root (empty when not given). An error when the tree has no tasks folder.
Context make_context(const std::string& root_option);

}  // namespace d2k
