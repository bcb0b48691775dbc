// Where and with what evaluations run: the device and its measured ceilings, the d2k tree, the caches,
// the worker executable and the sandbox. Made once per command and shared by every evaluation of it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "core/ceilings.hpp"
#include "core/device.hpp"
#include "runner/sandbox.hpp"

namespace d2k {

struct EvalEnvironment {
  Device device = Device::cpu;
  std::string device_name;
  Ceilings ceilings;
  std::filesystem::path root;         // holds tasks/ and include/d2k/solution.h
  std::filesystem::path build_cache;  // solution builds (runner/builder.hpp)
  std::filesystem::path scratch_dir;  // a fresh folder per worker (its working directory), removed after it
  std::filesystem::path worker;       // the d2k-worker executable
  std::optional<Sandbox> sandbox;     // builds and workers run in it (its mode and launcher)
};

}  // namespace d2k
