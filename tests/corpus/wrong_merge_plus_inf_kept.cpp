// A hurried implementer's mistake (issue 11), not a cheat: attn/merge_states written for FlashAttention 3's
// empty parts (-inf, weight e^-inf = 0) only, an honest fp32 merge otherwise. FlashAttention 2 marks an
// empty part +inf, and then max = +inf and e^(inf - inf) is NaN: the rows of those tokens come out NaN.
// Caught on the smoke workload with empty parts of both signs: incorrect_numerics, NaN in 'output'.
#include <cmath>

#include "bf16_bits.h"
#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& p_out = call->inputs[0];  // the task's order: prefix_output, prefix_lse, suffix_output,
  const d2k_tensor& p_lse = call->inputs[1];  // suffix_lse; output, output_lse
  const d2k_tensor& s_out = call->inputs[2];
  const d2k_tensor& s_lse = call->inputs[3];
  const d2k_tensor& out = call->outputs[0];
  const d2k_tensor& out_lse = call->outputs[1];
  const auto* x = static_cast<const uint16_t*>(p_out.data);
  const auto* y = static_cast<const uint16_t*>(s_out.data);
  auto* o = static_cast<uint16_t*>(out.data);
  for (int64_t n = 0; n < out.shape[0]; ++n) {
    for (int64_t h = 0; h < out.shape[1]; ++h) {
      const float a = static_cast<const float*>(p_lse.data)[h * p_lse.strides[0] + n * p_lse.strides[1]];
      const float b = static_cast<const float*>(s_lse.data)[h * s_lse.strides[0] + n * s_lse.strides[1]];
      const float m = std::fmax(a, b);  // the mistake: +inf is not made -inf first
      const float ea = std::exp(a - m), eb = std::exp(b - m), se = ea + eb;
      static_cast<float*>(out_lse.data)[h * out_lse.strides[0] + n * out_lse.strides[1]] = m + std::log(se);
      for (int64_t i = 0; i < out.shape[2]; ++i) {
        const float xi = bf16_to_float(x[n * p_out.strides[0] + h * p_out.strides[1] + i * p_out.strides[2]]);
        const float yi = bf16_to_float(y[n * s_out.strides[0] + h * s_out.strides[1] + i * s_out.strides[2]]);
        o[n * out.strides[0] + h * out.strides[1] + i * out.strides[2]] = round_to_bf16(ea / se * xi + eb / se * yi);
      }
    }
  }
  return 0;
}
