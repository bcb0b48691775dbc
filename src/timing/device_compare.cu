#include <cuda_runtime.h>

#include <cstdint>

#include "timing/device_compare.hpp"

namespace d2k {
namespace {

__device__ unsigned differing_bytes_of(unsigned x, unsigned y) {
  const unsigned d = x ^ y;
  return ((d & 0xFFu) != 0) + ((d & 0xFF00u) != 0) + ((d & 0xFF0000u) != 0) + ((d & 0xFF000000u) != 0);
}

// The bulk in 16-byte words when both buffers allow it, the rest byte by byte.
__global__ void count_differences(const unsigned char* a, const unsigned char* b, std::size_t words,
                                  std::size_t bytes, unsigned long long* count) {
  unsigned long long local = 0;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  const auto* wa = reinterpret_cast<const uint4*>(a);
  const auto* wb = reinterpret_cast<const uint4*>(b);
  for (std::size_t i = first; i < words; i += stride) {
    const uint4 x = wa[i], y = wb[i];
    local += differing_bytes_of(x.x, y.x) + differing_bytes_of(x.y, y.y) + differing_bytes_of(x.z, y.z) +
             differing_bytes_of(x.w, y.w);
  }
  for (std::size_t i = words * sizeof(uint4) + first; i < bytes; i += stride) local += a[i] != b[i];
  if (local != 0) atomicAdd(count, local);
}

}  // namespace

cudaError_t count_differing_bytes(const void* a, const void* b, std::size_t bytes, unsigned long long* count,
                                  cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  const bool aligned = (reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(b)) % 16 == 0;
  const std::size_t words = aligned ? bytes / sizeof(uint4) : 0;
  count_differences<<<264, 512, 0, stream>>>(static_cast<const unsigned char*>(a),
                                             static_cast<const unsigned char*>(b), words, bytes, count);
  return cudaGetLastError();
}

}  // namespace d2k
