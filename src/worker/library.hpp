// A solution's shared object and its entry points (include/d2k/solution.h).
#pragma once

#include <string>

#include "d2k/solution.h"

namespace d2k {

struct SolutionLibrary {
  using RunFn = int (*)(const d2k_call*);
  using WorkspaceSizeFn = int (*)(const d2k_call*, size_t*);
  using PrepareFn = int (*)(const d2k_call*, void**);
  using ReleaseFn = void (*)(void*);

  RunFn run = nullptr;                       // required
  WorkspaceSizeFn workspace_size = nullptr;  // optional
  PrepareFn prepare = nullptr;               // optional
  ReleaseFn release = nullptr;               // optional
};

// dlopen(RTLD_NOW | RTLD_LOCAL) and look the entry points up. The library stays loaded until the
// process ends: unloading candidate code while its kernels or threads may still exist gains nothing.
// Throws d2k::Error with dlerror's text, or naming the missing d2k_run.
SolutionLibrary load_library(const std::string& path);

}  // namespace d2k
