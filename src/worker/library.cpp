#include "worker/library.hpp"

#include <dlfcn.h>

#include "core/error.hpp"

namespace d2k {

SolutionLibrary load_library(const std::string& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    fail("cannot load {}: {}", path, why ? why : "unknown dlopen error");
  }
  SolutionLibrary library;
  library.run = reinterpret_cast<SolutionLibrary::RunFn>(::dlsym(handle, "d2k_run"));
  if (library.run == nullptr) fail("{} does not export d2k_run (is it declared extern \"C\"?)", path);
  library.workspace_size =
      reinterpret_cast<SolutionLibrary::WorkspaceSizeFn>(::dlsym(handle, "d2k_workspace_size"));
  library.prepare = reinterpret_cast<SolutionLibrary::PrepareFn>(::dlsym(handle, "d2k_prepare"));
  library.release = reinterpret_cast<SolutionLibrary::ReleaseFn>(::dlsym(handle, "d2k_release"));
  return library;
}

}  // namespace d2k
