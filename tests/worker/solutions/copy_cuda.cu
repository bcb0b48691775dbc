// y = x for contiguous f32 tensors, 16 bytes per thread and loop step: a plain bandwidth
// kernel, for the test that rotation keeps a timed call's inputs out of the L2.
#include <cstdint>
#include <cstdio>

#include "d2k/solution.h"

namespace {

__global__ void copy16(const uint4* x, uint4* y, int64_t words) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < words; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = x[i];
}

int64_t elements_of(const d2k_tensor& t) {
  int64_t n = 1;
  for (int d = 0; d < t.rank; ++d) n *= t.shape[d];
  return n;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  if (call->num_inputs != 1 || call->num_outputs != 1 || call->inputs[0].dtype != D2K_FLOAT32) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "expected one f32 input and one output");
    return 1;
  }
  const int64_t bytes = elements_of(call->inputs[0]) * 4;
  if (bytes % 16 != 0) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "expected a multiple of 16 bytes");
    return 1;
  }
  auto stream = static_cast<cudaStream_t>(call->stream);
  copy16<<<132 * 8, 512, 0, stream>>>(static_cast<const uint4*>(call->inputs[0].data),
                                      static_cast<uint4*>(call->outputs[0].data), bytes / 16);
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "%s", cudaGetErrorString(error));
    return 1;
  }
  return 0;
}
