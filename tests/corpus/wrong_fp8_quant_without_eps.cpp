// A hurried implementer's mistake (issue 11), not a cheat: quant/fp8_group_quant with amax taken as it is,
// without the eps floor (amax = max(amax, eps)). All-zero groups then get a scale of 0 (or, through
// frexp of 0, a power-of-two scale of 1) and near-zero groups their own tiny scale instead of eps / 448.
// Caught on the smoke workload with zero and near-zero groups: incorrect_numerics, "'scales'".

#include "honest_quant.h"

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor &x = call->inputs[0], &q = call->outputs[0], &s = call->outputs[1];
  const int64_t T = x.shape[0], G = x.shape[1] / 128;
  const bool ue8m0 = scalar(call, "ue8m0") != 0;
  const auto* xd = static_cast<const uint16_t*>(x.data);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t g = 0; g < G; ++g) {
      float amax = 0;
      for (int64_t k = g * 128; k < g * 128 + 128; ++k)
        amax = std::fmax(amax, std::fabs(bf16_value(xd[t * x.strides[0] + k * x.strides[1]])));
      float scale = amax / 448.0f;  // the mistake: no eps
      if (ue8m0) {
        int e;
        const float m = std::frexp(scale, &e);
        scale = std::ldexp(1.0f, m == 0.5f ? e - 1 : e);
      }
      static_cast<float*>(s.data)[t * s.strides[0] + g * s.strides[1]] = scale;
      for (int64_t k = g * 128; k < g * 128 + 128; ++k) {
        const double v = bf16_value(xd[t * x.strides[0] + k * x.strides[1]]);
        static_cast<uint8_t*>(q.data)[t * q.strides[0] + k * q.strides[1]] = to_e4m3(amax == 0 ? 0.0 : v / scale);
      }
    }
  }
  return 0;
}
