#include "eval/device_select.hpp"

#include <fmt/format.h>

#include <fstream>

#ifdef D2K_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace d2k {

std::optional<std::string> cuda_unavailable() {
#ifdef D2K_WITH_CUDA
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) return fmt::format("no usable CUDA GPU ({})", cudaGetErrorString(error));
  if (count == 0) return std::string("no CUDA GPU found");
  return std::nullopt;
#else
  return std::string("this d2k was built without CUDA");
#endif
}

std::string device_name(Device device) {
#ifdef D2K_WITH_CUDA
  if (device == Device::cuda) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) return prop.name;
    return "unknown CUDA GPU";
  }
#endif
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  return "cpu";
}

}  // namespace d2k
