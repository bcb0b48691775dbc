// Writes 16 floats past the end of its output on the device: the guards in GPU memory must see it.
#include "d2k/solution.h"

__global__ void overrun(float* y, int64_t n) {
  for (int64_t i = threadIdx.x; i < n + 16; i += blockDim.x) y[i] = 1.0f;
}

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& y = call->outputs[0];
  int64_t n = 1;
  for (int d = 0; d < y.rank; ++d) n *= y.shape[d];
  overrun<<<1, 128, 0, static_cast<cudaStream_t>(call->stream)>>>(static_cast<float*>(y.data), n);
  return 0;
}
