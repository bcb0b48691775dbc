#include "worker/byte_compare.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "timing/cuda_util.hpp"
#ifdef D2K_WITH_CUDA
#include "timing/device_compare.hpp"
#endif

namespace d2k {

ByteCompare::~ByteCompare() {
#ifdef D2K_WITH_CUDA
  if (counter_) cudaFree(counter_);
#endif
}

std::size_t ByteCompare::operator()(const GuardedBuffer& a, const GuardedBuffer& b) {
  if (a.bytes() != b.bytes()) return std::max(a.bytes(), b.bytes());
  if (a.device() == Device::cpu) {
    const auto* x = static_cast<const unsigned char*>(a.data());
    const auto* y = static_cast<const unsigned char*>(b.data());
    if (std::memcmp(x, y, a.bytes()) == 0) return 0;
    std::size_t differ = 0;
    for (std::size_t i = 0; i < a.bytes(); ++i) differ += x[i] != y[i];
    return differ;
  }
#ifdef D2K_WITH_CUDA
  if (!counter_) check_cuda(cudaMalloc(&counter_, sizeof(unsigned long long)), "cudaMalloc");
  auto* count = static_cast<unsigned long long*>(counter_);
  check_cuda(cudaMemset(count, 0, sizeof *count), "cudaMemset");
  check_cuda(count_differing_bytes(a.data(), b.data(), a.bytes(), count, nullptr), "comparing outputs on the GPU");
  unsigned long long host = 0;
  check_cuda(cudaMemcpy(&host, count, sizeof host, cudaMemcpyDeviceToHost), "cudaMemcpy from the GPU");
  return static_cast<std::size_t>(host);
#else
  fail("the cuda device needs d2k built with CUDA");
#endif
}

}  // namespace d2k
