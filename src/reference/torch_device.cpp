#include "reference/torch_device.hpp"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <dlfcn.h>

#include <filesystem>
#include <mutex>

#include "core/error.hpp"

namespace d2k {
namespace {

std::filesystem::path torch_lib_dir() {
  Dl_info info{};
  // Any symbol of libtorch_cpu.so tells where it was loaded from.
  if (dladdr(reinterpret_cast<void*>(&at::globalContext), &info) == 0 || info.dli_fname == nullptr)
    fail("cannot locate libtorch_cpu.so in this process");
  return std::filesystem::path(info.dli_fname).parent_path();
}

void load_torch_cuda() {
  const auto library = torch_lib_dir() / "libtorch_cuda.so";
  if (!std::filesystem::exists(library))
    fail("the cuda device needs {}, which this libtorch does not have", library.string());
  if (dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr)
    fail("could not load {}: {}", library.string(), dlerror());
  if (!at::hasCUDA()) fail("libtorch_cuda.so loaded but torch sees no CUDA device");
}

}  // namespace

void require_torch_device(Device device) {
  if (device == Device::cpu) return;
  static std::once_flag once;
  std::call_once(once, load_torch_cuda);
}

}  // namespace d2k
