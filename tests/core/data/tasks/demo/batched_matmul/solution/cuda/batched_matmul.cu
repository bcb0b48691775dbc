// demo/batched_matmul on the cuda device: one thread per output element over contiguous f32 tensors.
#include "d2k/solution.h"

namespace {

__global__ void batched_matmul(const float* a, const float* w, float* c, int64_t batch, int64_t m, int64_t k, int64_t n) {
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= batch * m * n) return;
  const int64_t b = index / (m * n), i = index / n % m, j = index % n;
  float sum = 0.0f;
  for (int64_t p = 0; p < k; ++p) sum += a[(b * m + i) * k + p] * w[(b * k + p) * n + j];
  c[index] = sum;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& a = call->inputs[0];
  const d2k_tensor& w = call->inputs[1];
  const int64_t batch = a.shape[0], m = a.shape[1], k = a.shape[2], n = w.shape[2];
  const int64_t total = batch * m * n;
  batched_matmul<<<static_cast<unsigned>((total + 255) / 256), 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(a.data), static_cast<const float*>(w.data), static_cast<float*>(call->outputs[0].data),
      batch, m, k, n);
  return 0;
}
