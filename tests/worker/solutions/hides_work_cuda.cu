// Cheats the timer: does its real work on a stream of its own that the call's events do not see.
// The output is right; the timing must still count the hidden work.
#include "d2k/solution.h"

__global__ void slow_copy(const float* x, float* y, int64_t n, int repeats) {
  for (int r = 0; r < repeats; ++r) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
      y[i] = x[i] + 0.0f * r;
    }
  }
}

extern "C" int d2k_run(const d2k_call* call) {
  static cudaStream_t hidden = nullptr;
  if (hidden == nullptr) cudaStreamCreateWithFlags(&hidden, cudaStreamNonBlocking);
  const d2k_tensor& y = call->outputs[0];
  int64_t n = 1;
  for (int d = 0; d < y.rank; ++d) n *= y.shape[d];
  slow_copy<<<132, 256, 0, hidden>>>(static_cast<const float*>(call->inputs[0].data),
                                     static_cast<float*>(y.data), n, 400);
  return 0;
}
