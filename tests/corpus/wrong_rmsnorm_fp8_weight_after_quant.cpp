// A hurried implementer's mistake (issue 11), not a cheat: quant/rmsnorm_fp8_quant with the weight applied
// after the quantization. The normalized row bf16(x * inv) is quantized with its own scale, then each fp8
// value is multiplied by its weight and rounded to fp8 again; an honest loop otherwise. The scale is not
// the weighted row's, so the largest weighted elements saturate, and every element is rounded to fp8
// twice. Caught on Qwen2.5-7B's smoke workload: elements far outside their bound (the scales fail too):
// incorrect_numerics, "'dequant'".
#include <cmath>

#include "bf16_bits.h"
#include "honest_quant.h"  // to_e4m3: OCP e4m3fn, round to nearest even, saturated

// The value of an e4m3fn byte (no NaN here: the encoder saturates).
static double e4m3_value(uint8_t byte) {
  const int exponent = (byte >> 3) & 0xf, mantissa = byte & 7;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 10);
  return byte & 0x80 ? -magnitude : magnitude;
}

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor &x = call->inputs[0], &w = call->inputs[1], &q = call->outputs[0], &s = call->outputs[1];
  const float eps = static_cast<float>(call->scalars[0].f);
  const int64_t T = x.shape[0], H = x.shape[1];
  const auto* xd = static_cast<const uint16_t*>(x.data);
  const auto* wd = static_cast<const uint16_t*>(w.data);
  for (int64_t t = 0; t < T; ++t) {
    const uint16_t* row = xd + t * x.strides[0];
    double sum_sq = 0;
    for (int64_t i = 0; i < H; ++i) sum_sq += double(bf16_to_float(row[i * x.strides[1]])) * bf16_to_float(row[i * x.strides[1]]);
    const float inv = float(1.0 / std::sqrt(float(sum_sq / H) + eps));
    float amax = 1.0f / 512.0f;
    for (int64_t i = 0; i < H; ++i)
      amax = std::fmax(amax, std::fabs(bf16_to_float(round_to_bf16(bf16_to_float(row[i * x.strides[1]]) * inv))));
    static_cast<float*>(s.data)[t * s.strides[0]] = amax / 448.0f;
    for (int64_t i = 0; i < H; ++i) {
      const float normed = bf16_to_float(round_to_bf16(bf16_to_float(row[i * x.strides[1]]) * inv));
      const double first = e4m3_value(to_e4m3(double(normed) * 448.0 / amax));  // the normalized row in fp8
      static_cast<uint8_t*>(q.data)[t * q.strides[0] + i * q.strides[1]] =
          to_e4m3(first * bf16_to_float(wd[i * w.strides[0]]));  // then the weight, and fp8 again
    }
  }
  return 0;
}
