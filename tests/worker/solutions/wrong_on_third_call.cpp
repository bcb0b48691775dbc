// Right on every call but the third (the correctness call is the first): y = x + alpha * z, with one
// element off by one on call 3. A harness that checks only the first and the last call misses it.
#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  static int calls = 0;
  ++calls;
  const d2k_tensor& x = call->inputs[0];
  const d2k_tensor& z = call->inputs[1];
  const d2k_tensor& y = call->outputs[0];
  float alpha = static_cast<float>(call->scalars[0].f);
  for (int64_t i = 0; i < y.shape[0]; ++i) {
    for (int64_t j = 0; j < y.shape[1]; ++j) {
      float xv = static_cast<const float*>(x.data)[i * x.strides[0] + j * x.strides[1]];
      float zv = static_cast<const float*>(z.data)[i * z.strides[0] + j * z.strides[1]];
      static_cast<float*>(y.data)[i * y.strides[0] + j * y.strides[1]] = xv + alpha * zv;
    }
  }
  if (calls == 3) static_cast<float*>(y.data)[0] += 1.0f;
  return 0;
}
