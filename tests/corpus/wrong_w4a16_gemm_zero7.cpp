// A hurried implementer's mistake (issue 14), not a cheat: quant/w4a16_gemm with the GPTQ v1 zero point,
// 7 instead of 8 (the checkpoint's qzeros store zero - 1 and the + 1 is forgotten, or the symmetric zero
// is taken as 2^(bits - 1) - 1). Every weight moves up by one scale step, so each output gains
// sum over groups of scale * (sum of x over the group): incorrect_numerics, "'y'".

#include "bf16_bits.h"
#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& x = call->inputs[0];
  const d2k_tensor& qweight = call->inputs[1];
  const auto* px = static_cast<const uint16_t*>(x.data);
  const auto* pq = static_cast<const int32_t*>(qweight.data);
  const auto* ps = static_cast<const uint16_t*>(call->inputs[2].data);
  auto* py = static_cast<uint16_t*>(call->outputs[0].data);
  const int64_t M = x.shape[0], K = x.shape[1], N = qweight.shape[1];
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) {
        const auto word = static_cast<uint32_t>(pq[(k / 8) * N + n]);
        const int code = static_cast<int>((word >> (4 * (k % 8))) & 15u) - 7;  // should be - 8
        acc += bf16_to_float(px[m * K + k]) * (static_cast<float>(code) * bf16_to_float(ps[(k / 128) * N + n]));
      }
      py[m * N + n] = round_to_bf16(acc);
    }
  }
  return 0;
}
