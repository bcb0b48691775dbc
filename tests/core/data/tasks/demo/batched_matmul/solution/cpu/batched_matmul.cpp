// demo/batched_matmul on the cpu device: the plain triple loop over contiguous f32 tensors.
#include <cstdio>

#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& a = call->inputs[0];
  const d2k_tensor& w = call->inputs[1];
  const d2k_tensor& c = call->outputs[0];
  const int64_t batch = a.shape[0], m = a.shape[1], k = a.shape[2], n = w.shape[2];
  const float* x = static_cast<const float*>(a.data);
  const float* y = static_cast<const float*>(w.data);
  float* z = static_cast<float*>(c.data);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float sum = 0.0f;
        for (int64_t p = 0; p < k; ++p) sum += x[(b * m + i) * k + p] * y[(b * k + p) * n + j];
        z[(b * m + i) * n + j] = sum;
      }
  return 0;
}
