// Threat 10, hard-coded shapes: built for the published DeepSeek-V3 workloads, it takes K = 7168
// for granted instead of reading the shape (it does read the strides).
// Caught on the hidden workload of a final evaluation (K = 1536): it writes past the end of q and
// scales into the guard regions: incorrect_shape, "wrote past the end of output".
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

extern "C" int d2k_run(const d2k_call* call) {
  constexpr int64_t K = 7168, G = K / 128;
  const d2k_tensor &x = call->inputs[0], &q = call->outputs[0], &s = call->outputs[1];
  const auto* xd = static_cast<const uint16_t*>(x.data);
  const float eps = float(scalar(call, "eps"));
  const bool ue8m0 = scalar(call, "ue8m0") != 0;
  for (int64_t t = 0; t < x.shape[0]; ++t) {
    for (int64_t g = 0; g < G; ++g) {
      float amax = eps;
      for (int64_t k = g * 128; k < g * 128 + 128; ++k) amax = std::fmax(amax, std::fabs(bf16_value(xd[t * x.strides[0] + k * x.strides[1]])));
      float scale = amax / 448.0f;
      if (ue8m0) {
        int e;
        const float m = std::frexp(scale, &e);
        scale = std::ldexp(1.0f, m == 0.5f ? e - 1 : e);
      }
      static_cast<float*>(s.data)[t * s.strides[0] + g * s.strides[1]] = scale;
      for (int64_t k = g * 128; k < g * 128 + 128; ++k) {
        const double v = bf16_value(xd[t * x.strides[0] + k * x.strides[1]]);
        static_cast<uint8_t*>(q.data)[t * q.strides[0] + k * q.strides[1]] = to_e4m3(ue8m0 ? v / scale : v * 448.0 / amax);
      }
    }
  }
  return 0;
}
