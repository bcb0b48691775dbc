// Eager reference for moe/silu_mul_fp8_quant, written as SGLang's unfused path is: SiluAndMul's
// forward_native (F.silu(x[..., :I]) * x[..., I:], in bf16), then per_token_group_quant_fp8's torch form
// (y.float() grouped by 128, amax clamped at eps, scale = amax / 448, q = (y / scale).clamp.to(fp8)).
// On bf16 inputs silu's result and the product are each rounded to bf16, as in the fused kernel. With
// float64 inputs (the oracle) the two roundings are kept on purpose: the specification quantizes the bf16
// value y, and the fp8 result is decided by y's exact bits (see task.toml).
#include <ATen/ATen.h>

#include "core/error.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

constexpr double kFp8Max = 448.0;  // largest finite OCP e4m3fn value

// The activation dtype's rounding, also on the float64 oracle: a float64 value goes to bf16 through
// fp32 (torch's conversion), i.e. silu correctly rounded to fp32, then to bf16, as an fp32 kernel does.
at::Tensor as_bf16(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? t.to(at::kBFloat16).to(at::kDouble) : t;
}

class SiluMulFp8Quant final : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override {
    const at::Tensor& x = inputs.at("x");
    const int64_t group_size = scalars.i("group_size");
    const double eps = scalars.f("eps");
    const int64_t T = x.size(0), I = x.size(1) / 2;
    if (group_size <= 0 || I % group_size != 0) {
      fail("moe/silu_mul_fp8_quant: scalar group_size = {} does not divide I = {}", group_size, I);
    }

    const at::Tensor y = as_bf16(as_bf16(at::silu(x.narrow(1, 0, I))) * x.narrow(1, I, I));
    const auto acc = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    const at::Tensor yg = y.to(acc).reshape({T, I / group_size, group_size});
    const at::Tensor scale = yg.abs().amax(-1, /*keepdim=*/true).clamp_min(eps) / kFp8Max;
    // The clamp is needed: torch's conversion to e4m3fn gives NaN above 464 instead of saturating. For
    // the oracle y / scale is a quotient of bf16 values, exactly an fp8 midpoint or far from every one,
    // so its way to fp8 through fp32 cannot round differently from the exact quotient.
    const at::Tensor q = (yg / scale).clamp(-kFp8Max, kFp8Max).to(at::kFloat8_e4m3fn).reshape({T, I});
    return {{"q", q}, {"scales", scale.squeeze(-1)}};
  }

  // q * scale per group (the values the next GEMM sees), the scales, and q itself: the oracle's y and
  // amax are the specification's bf16 values, so its q is the exact quotient rounded once, and a correct
  // q differs from it only in rare elements (task.toml's `misrounded`).
  TensorMap comparable(const TensorMap& outputs, const Scalars&) const override {
    const at::Tensor& q = outputs.at("q");
    const at::Tensor scales = outputs.at("scales").to(at::kDouble);
    const int64_t T = q.size(0), I = q.size(1), G = scales.size(1);
    const at::Tensor dequant = q.to(at::kDouble).reshape({T, G, I / G}) * scales.unsqueeze(-1);
    return {{"dequant", dequant.reshape({T, I})}, {"scales", scales}, {"q", q}};
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::SiluMulFp8Quant);
