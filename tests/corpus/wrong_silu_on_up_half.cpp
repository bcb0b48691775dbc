// A hurried implementer's mistake (issue 11), not a cheat: act/silu_and_mul with silu applied to the up
// half and the gate half as the multiplier (vLLM's act_first = false, the "mul_and_silu" order), an
// honest loop otherwise. Caught: the outputs are wrong almost everywhere: incorrect_numerics, "'out'".
#include <cmath>

#include "bf16_bits.h"
#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& x = call->inputs[0];
  const d2k_tensor& out = call->outputs[0];
  const int64_t width = out.shape[1];
  const auto* in = static_cast<const uint16_t*>(x.data);
  auto* o = static_cast<uint16_t*>(out.data);
  for (int64_t t = 0; t < out.shape[0]; ++t) {
    for (int64_t i = 0; i < width; ++i) {
      const float g = bf16_to_float(in[t * x.strides[0] + i * x.strides[1]]);
      const float u = bf16_to_float(in[t * x.strides[0] + (width + i) * x.strides[1]]);
      const float silu_u = bf16_to_float(round_to_bf16(u / (1.0f + std::exp(-u))));  // the wrong half
      o[t * out.strides[0] + i * out.strides[1]] = round_to_bf16(silu_u * g);
    }
  }
  return 0;
}
