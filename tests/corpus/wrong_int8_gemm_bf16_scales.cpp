// A hurried implementer's mistake (issue 14), not a cheat: quant/int8_gemm with the scales applied once in
// bf16 before the product, the way a bf16 GEMM on dequantized operands computes it: a[m, k] * s_a[m] and
// b[n, k] * s_b[n] each rounded to bf16, their products summed in fp32, the bias added and rounded once.
// Each operand carries one bf16 rounding, so a large share of the outputs lands off its correctly rounded
// value and elements where the bias cancels the product exceed their bound: incorrect_numerics, "'d'".

#include "bf16_bits.h"
#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& a = call->inputs[0];
  const d2k_tensor& b = call->inputs[1];
  const auto* pa = static_cast<const int8_t*>(a.data);
  const auto* pb = static_cast<const int8_t*>(b.data);
  const auto* s_a = static_cast<const float*>(call->inputs[2].data);
  const auto* s_b = static_cast<const float*>(call->inputs[3].data);
  const auto* bias = static_cast<const uint16_t*>(call->inputs[4].data);
  auto* d = static_cast<uint16_t*>(call->outputs[0].data);
  const int64_t M = a.shape[0], K = a.shape[1], N = b.shape[0];
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) {
        const float x = bf16_to_float(round_to_bf16(static_cast<float>(pa[m * K + k]) * s_a[m]));
        const float w = bf16_to_float(round_to_bf16(static_cast<float>(pb[n * K + k]) * s_b[n]));
        acc += x * w;
      }
      d[m * N + n] = round_to_bf16(acc + bf16_to_float(bias[n]));
    }
  }
  return 0;
}
