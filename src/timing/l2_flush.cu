// Cold-L2 flush by reading. Writing a buffer (cudaMemset, as nvbench and triton do) leaves the L2 full
// of dirty lines that the timed call then pays to write back: a plain copy of 64 MB measured ~14%
// slower after a memset flush than after a read flush on the H200. Reading a buffer twice the L2's
// size leaves it holding clean lines of that buffer and nothing of the call's data.
#include <cuda_runtime.h>

#include <cstdint>

#include "timing/l2_flush.hpp"

namespace d2k {
namespace {

__global__ void read_all(const uint4* data, std::size_t count, unsigned* sink) {
  unsigned acc = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const uint4 v = data[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  // Never true for the harness's fill pattern; it keeps the loads alive.
  if (acc == 0x9E3779B9u) *sink = acc;
}

}  // namespace

cudaError_t flush_l2_by_reading(const void* buffer, std::size_t bytes, unsigned* sink, cudaStream_t stream) {
  const std::size_t count = bytes / sizeof(uint4);
  read_all<<<1024, 512, 0, stream>>>(static_cast<const uint4*>(buffer), count, sink);
  return cudaGetLastError();
}

}  // namespace d2k
