#include "eval/device_select.hpp"

#include <fmt/format.h>


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

}  // namespace d2k
