// Right outputs, but scribbles on x whenever x is not where the first call found it: a solution that
// leaves the correctness call's inputs alone and modifies only the copies the timed calls rotate through.
#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  static const void* first = nullptr;
  const d2k_tensor& x = call->inputs[0];
  const d2k_tensor& z = call->inputs[1];
  const d2k_tensor& y = call->outputs[0];
  if (first == nullptr) first = x.data;
  float alpha = static_cast<float>(call->scalars[0].f);
  for (int64_t i = 0; i < y.shape[0]; ++i) {
    for (int64_t j = 0; j < y.shape[1]; ++j) {
      float xv = static_cast<const float*>(x.data)[i * x.strides[0] + j * x.strides[1]];
      float zv = static_cast<const float*>(z.data)[i * z.strides[0] + j * z.strides[1]];
      static_cast<float*>(y.data)[i * y.strides[0] + j * y.strides[1]] = xv + alpha * zv;
    }
  }
  // After computing, so this call's outputs stay right; x's last element is not read by anyone after.
  if (x.data != first) static_cast<float*>(x.data)[(x.shape[0] - 1) * x.strides[0] + (x.shape[1] - 1) * x.strides[1]] = 0.0f;
  return 0;
}
