// Threat 9, a shortcut that relies on the input distribution: assumes standard-normal inputs, so
// no group's largest magnitude exceeds 4, and uses one fixed scale 4/448 instead of a reduction.
// Caught: the scales are checked on their own, and heavy-tailed workloads saturate: incorrect_numerics.
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor &x = call->inputs[0], &q = call->outputs[0], &s = call->outputs[1];
  const float scale = 4.0f / 448.0f;
  const auto* xd = static_cast<const uint16_t*>(x.data);
  for (int64_t t = 0; t < x.shape[0]; ++t) {
    for (int64_t k = 0; k < x.shape[1]; ++k)
      static_cast<uint8_t*>(q.data)[t * q.strides[0] + k * q.strides[1]] =
          to_e4m3(bf16_value(xd[t * x.strides[0] + k * x.strides[1]]) / scale);
    for (int64_t g = 0; g < s.shape[1]; ++g) static_cast<float*>(s.data)[t * s.strides[0] + g * s.strides[1]] = scale;
  }
  return 0;
}
