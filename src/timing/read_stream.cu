#include "timing/read_stream.hpp"

#include <cstdint>

namespace d2k {
namespace {

constexpr int kThreads = 512;
constexpr int kLoads = 4;  // 16-byte loads in flight per thread

__global__ void __launch_bounds__(kThreads) read_stream_kernel(const uint4* data, std::size_t count, unsigned* sink) {
  const std::size_t stride = std::size_t(gridDim.x) * kThreads;
  unsigned acc = 0;
  std::size_t i = blockIdx.x * std::size_t(kThreads) + threadIdx.x;
  for (; i + (kLoads - 1) * stride < count; i += kLoads * stride) {
    uint4 v[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) v[j] = __ldcs(data + i + j * stride);  // streamed: no reuse
#pragma unroll
    for (int j = 0; j < kLoads; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  for (; i < count; i += stride) {
    const uint4 v = __ldcs(data + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  // Never true for the caller's fill pattern; it keeps the loads alive.
  if (acc == 0x9E3779B9u) *sink = acc;
}

}  // namespace

cudaError_t read_stream(const void* buffer, std::size_t bytes, int blocks, unsigned* sink, cudaStream_t stream) {
  read_stream_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint4*>(buffer), bytes / sizeof(uint4), sink);
  return cudaGetLastError();
}

}  // namespace d2k
