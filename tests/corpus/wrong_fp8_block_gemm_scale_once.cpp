// A hurried implementer's mistake (issue 14), not a cheat: quant/fp8_block_gemm with the block scales
// applied once after the whole K sum, the way a per-tensor or per-row scaled fp8 GEMM applies its scales:
// the e4m3 products summed over all of K in fp32, then multiplied by the first K block's sa[m, 0] and
// sb[n / 128, 0]. The scales differ from block to block (by orders of magnitude under heavy tails), so the
// result is far off everywhere: incorrect_numerics, "'c'".
#include <cmath>
#include <cstdint>

#include "bf16_bits.h"
#include "d2k/solution.h"

namespace {

float e4m3_to_float(uint8_t bits) {
  const int exponent = (bits >> 3) & 0xf, mantissa = bits & 0x7;
  const float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                                        : std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
  return (bits & 0x80) ? -magnitude : magnitude;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& a = call->inputs[0];
  const d2k_tensor& sa = call->inputs[1];
  const d2k_tensor& b = call->inputs[2];
  const d2k_tensor& sb = call->inputs[3];
  const auto* pa = static_cast<const uint8_t*>(a.data);
  const auto* pb = static_cast<const uint8_t*>(b.data);
  const auto* psa = static_cast<const float*>(sa.data);
  const auto* psb = static_cast<const float*>(sb.data);
  auto* c = static_cast<uint16_t*>(call->outputs[0].data);
  const int64_t M = a.shape[0], K = a.shape[1], N = b.shape[0];
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc += e4m3_to_float(pa[m * K + k]) * e4m3_to_float(pb[n * K + k]);
      c[m * N + n] = round_to_bf16(acc * psa[m * sa.strides[0]] * psb[(n / 128) * sb.strides[0]]);
    }
  }
  return 0;
}
