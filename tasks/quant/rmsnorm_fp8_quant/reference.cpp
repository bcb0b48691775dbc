// Eager reference for quant/rmsnorm_fp8_quant, written as vLLM's unfused path is (RMSNorm.forward_native,
// then QuantFP8.forward_native with per-token scales):
//   h = x.float(); y = (h * rsqrt(mean(h^2) + eps)).to(bf16) * weight
//   scale = (amax(|y|) / 448).clamp(min = 1 / (448 * 512)); q = (y.float() * scale.reciprocal()).clamp.to(fp8)
// On bf16 inputs y is rounded twice, as the fused kernel rounds it; with float64 inputs (the oracle)
// nothing is rounded before the fp8 conversion.
#include <ATen/ATen.h>

#include "reference/task_code.hpp"

namespace d2k {
namespace {

constexpr double kFp8Max = 448.0;                       // largest finite OCP e4m3fn value
constexpr double kMinScale = 1.0 / (kFp8Max * 512.0);  // vLLM's min_scaling_factor for fp8

class RmsNormFp8Quant final : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override {
    const at::Tensor& x = inputs.at("x");
    const at::Tensor& weight = inputs.at("weight");
    const double eps = scalars.f("eps");
    const auto acc = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;

    const at::Tensor h = x.to(acc);
    const at::Tensor variance = h.pow(2).mean(-1, /*keepdim=*/true);
    // bf16 * bf16 is rounded to bf16 by torch, as c10's operator* rounds it in the fused kernel.
    const at::Tensor y = (h * at::rsqrt(variance + eps)).to(x.scalar_type()) * weight;

    const at::Tensor amax = y.abs().amax(-1, /*keepdim=*/true).to(acc);
    const at::Tensor scale = (amax / kFp8Max).clamp_min(kMinScale);
    // The clamp is needed: torch's conversion to e4m3fn gives NaN above 464 instead of saturating. For
    // the oracle the conversion goes double -> float -> fp8, a double rounding that can move a value
    // lying within 2^-24 (relative) of an fp8 midpoint: about one element in a million, by one step,
    // far inside the tolerance.
    const at::Tensor q = (y.to(acc) * scale.reciprocal()).clamp(-kFp8Max, kFp8Max).to(at::kFloat8_e4m3fn);
    return {{"q", q}, {"scales", scale}};
  }

  // q and its row's scale only mean something together: compare q * scale, and the scales alone.
  TensorMap comparable(const TensorMap& outputs, const Scalars&) const override {
    const at::Tensor scales = outputs.at("scales").to(at::kDouble);
    return {{"dequant", outputs.at("q").to(at::kDouble) * scales}, {"scales", scales}};
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::RmsNormFp8Quant);
