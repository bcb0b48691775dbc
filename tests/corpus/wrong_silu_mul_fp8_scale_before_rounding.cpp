// A hurried implementer's mistake (issue 11), not a cheat: moe/silu_mul_fp8_quant with each group's scale
// taken from silu(g) * u in fp32, before the value is rounded to bf16, while the quotient divides the bf16
// value as the specification says; an honest loop otherwise. Every scale is up to two bf16 roundings off
// the bf16 amax, close enough that the values and the scales pass their bounds, but about 2% of the fp8
// elements land on the other side of a rounding midpoint. Caught on DeepSeek-V3's smoke workload by q's
// `misrounded` share: incorrect_numerics, "'q'" (the exact quotient rounded once is the task's q).
#include <cmath>

#include "bf16_bits.h"
#include "honest_quant.h"  // to_e4m3: OCP e4m3fn, round to nearest even, saturated

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor &x = call->inputs[0], &q = call->outputs[0], &s = call->outputs[1];
  const int64_t T = x.shape[0], I = x.shape[1] / 2, G = I / 128;
  const float eps = 1e-10f;
  const auto* xd = static_cast<const uint16_t*>(x.data);
  for (int64_t t = 0; t < T; ++t) {
    const uint16_t* row = xd + t * x.strides[0];
    for (int64_t k = 0; k < G; ++k) {
      float y[128], amax = eps;
      for (int64_t j = 0; j < 128; ++j) {
        const int64_t i = k * 128 + j;
        const float g = bf16_to_float(row[i * x.strides[1]]), u = bf16_to_float(row[(I + i) * x.strides[1]]);
        const float product = g / (1.0f + std::exp(-g)) * u;
        amax = std::fmax(amax, std::fabs(product));  // the mistake: the unrounded value sets the scale
        y[j] = bf16_to_float(round_to_bf16(bf16_to_float(round_to_bf16(g / (1.0f + std::exp(-g)))) * u));
      }
      static_cast<float*>(s.data)[t * s.strides[0] + k * s.strides[1]] = amax / 448.0f;
      for (int64_t j = 0; j < 128; ++j)
        static_cast<uint8_t*>(q.data)[t * q.strides[0] + (k * 128 + j) * q.strides[1]] = to_e4m3(double(y[j]) * 448.0 / amax);
    }
  }
  return 0;
}
