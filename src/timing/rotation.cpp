#include "timing/rotation.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "timing/cuda_util.hpp"

namespace d2k {

int rotation_sets(std::size_t set_bytes, std::size_t set_overhead_bytes, std::size_t cache_bytes,
                  std::size_t budget_bytes, const TimingConfig& config) {
  if (config.rotate_cache_multiple <= 0 || set_bytes == 0) return 1;
  const double target = config.rotate_cache_multiple * static_cast<double>(cache_bytes);
  const double wanted = std::ceil(target / static_cast<double>(set_bytes));
  const std::size_t allocation = set_bytes + set_overhead_bytes;
  const std::size_t fitting = budget_bytes / allocation;
  const double most = static_cast<double>(std::min<std::size_t>(fitting, std::max(1, config.rotate_max_sets)));
  const double sets = std::min(std::max(wanted, 2.0), most);
  return std::max(1, static_cast<int>(sets));
}

std::size_t last_level_cache_bytes(Device device) {
  if (device == Device::cpu) {
    for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
      const long bytes = ::sysconf(name);
      if (bytes > 0) return static_cast<std::size_t>(bytes);
    }
    return std::size_t{32} << 20;
  }
#ifdef D2K_WITH_CUDA
  int gpu = 0;
  check_cuda(cudaGetDevice(&gpu), "cudaGetDevice");
  int bytes = 0;
  check_cuda(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, gpu), "cudaDeviceGetAttribute");
  return static_cast<std::size_t>(bytes);
#else
  fail("no cuda device: d2k was built without CUDA");
#endif
}

}  // namespace d2k
