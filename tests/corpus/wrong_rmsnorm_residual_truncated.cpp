// A hurried implementer's mistake (issue 11), not a cheat: norm/fused_add_rmsnorm with the residual sum
// truncated to bf16 (the top 16 bits kept) instead of rounded to nearest even, honest otherwise. Its nmse
// (about 8e-6) is inside the residual's bound and every element is within its bound; about half the
// elements are off the correctly rounded sum. Caught by the tolerance's `misrounded`:
// incorrect_numerics, "not the exact result rounded to nearest even".
#include <cmath>

#include "bf16_bits.h"
#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& x = call->inputs[0];
  const d2k_tensor& residual = call->inputs[1];
  const d2k_tensor& weight = call->inputs[2];
  const float eps = static_cast<float>(call->scalars[0].f);
  auto* xs = static_cast<uint16_t*>(x.data);
  auto* rs = static_cast<uint16_t*>(residual.data);
  const auto* w = static_cast<const uint16_t*>(weight.data);
  const int64_t hidden = x.shape[1];
  for (int64_t t = 0; t < x.shape[0]; ++t) {
    float sum_sq = 0.0f;
    for (int64_t i = 0; i < hidden; ++i) {
      uint16_t& r = rs[t * residual.strides[0] + i * residual.strides[1]];
      r = truncate_to_bf16(bf16_to_float(xs[t * x.strides[0] + i * x.strides[1]]) + bf16_to_float(r));
      sum_sq += bf16_to_float(r) * bf16_to_float(r);
    }
    const float inv = 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + eps);
    for (int64_t i = 0; i < hidden; ++i) {
      const float r = bf16_to_float(rs[t * residual.strides[0] + i * residual.strides[1]]);
      const float normed = bf16_to_float(round_to_bf16(r * inv));
      xs[t * x.strides[0] + i * x.strides[1]] = round_to_bf16(normed * bf16_to_float(w[i * weight.strides[0]]));
    }
  }
  return 0;
}
