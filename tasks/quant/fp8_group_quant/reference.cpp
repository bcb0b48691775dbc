// quant/fp8_group_quant: per-token, per-128-group dynamic fp8 e4m3 quantization, written the way
// SGLang's torch-native per_token_group_quant_fp8 and DeepGEMM's per_token_cast_to_fp8 write it.
#include <ATen/ATen.h>

#include "core/error.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

constexpr double kFp8Max = 448.0;  // largest finite OCP e4m3fn value

class Fp8GroupQuant final : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override {
    const at::Tensor& x = inputs.at("x");
    const int64_t group_size = scalars.i("group_size");
    const bool ue8m0 = scalars.i("ue8m0") != 0;
    const double eps = scalars.f("eps");
    const int64_t T = x.size(0), K = x.size(1);
    if (group_size <= 0 || K % group_size != 0) {
      fail("quant/fp8_group_quant: scalar group_size = {} does not divide K = {}", group_size, K);
    }

    auto acc = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    at::Tensor xg = x.to(acc).reshape({T, K / group_size, group_size});
    at::Tensor scale = xg.abs().amax(-1, /*keepdim=*/true).clamp_min(eps) / kFp8Max;
    if (ue8m0) {
      // 2^ceil(log2(scale)), as DeepGEMM's ceil_to_ue8m0, but with the exponent read by frexp
      // (scale = m * 2^e, m in [0.5, 1): the ceiling is e, or e - 1 when m is exactly 0.5). The
      // float64 log2 of CUDA's libdevice is an ulp off at some exact powers of two (2^-6 and 2^-3
      // among them), where the ceiling would double the oracle's scale. amax / 448 is a power of
      // two whenever amax is 1.75 * 2^k, which bf16 data hits often.
      auto [mantissa, exponent] = at::frexp(scale);
      scale = at::exp2((exponent - mantissa.eq(0.5).to(exponent.scalar_type())).to(acc));
    }
    // The clamp is needed: torch's float -> e4m3fn conversion turns anything above 464 into NaN
    // instead of saturating. For the float64 oracle the conversion goes double -> float -> fp8: a
    // double rounding that cannot change the result here, because for bf16 inputs x / scale either
    // lies exactly on an fp8 rounding midpoint (then the float holds it exactly and ties go to even)
    // or at least 1e-4 (relative) away from every midpoint.
    at::Tensor q = (xg / scale).clamp(-kFp8Max, kFp8Max).to(at::kFloat8_e4m3fn).reshape({T, K});
    return {{"q", q}, {"scales", scale.squeeze(-1)}};
  }

  // q and scale only mean something together: compare q * scale per group, and the scales alone.
  TensorMap comparable(const TensorMap& outputs, const Scalars& scalars) const override {
    const at::Tensor& q = outputs.at("q");
    const at::Tensor& scales = outputs.at("scales");
    const int64_t T = q.size(0), K = q.size(1), G = scales.size(1);
    at::Tensor dequant = q.to(at::kDouble).reshape({T, G, K / G}) * scales.to(at::kDouble).unsqueeze(-1);
    return {{"dequant", dequant.reshape({T, K})}, {"scales", scales.to(at::kDouble)}};
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::Fp8GroupQuant);
