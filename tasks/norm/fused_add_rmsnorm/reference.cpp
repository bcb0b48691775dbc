// Eager reference for norm/fused_add_rmsnorm, written as a decoder layer writes it in PyTorch:
//   residual += x; h = residual.float(); x = (h * rsqrt(h.pow(2).mean(-1) + eps)).to(bf16) * weight
// Both results are in place. With float64 inputs (the oracle) every step stays float64, unrounded.
#include "reference/task_code.hpp"

namespace d2k {
namespace {

class FusedAddRmsNorm : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override {
    at::Tensor& x = inputs.at("x");
    at::Tensor& residual = inputs.at("residual");
    const at::Tensor& weight = inputs.at("weight");
    const double eps = scalars.f("eps");
    const auto acc = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;

    // The sum is rounded to the residual's dtype here, and the norm reads that rounded value back.
    residual.add_(x);
    const auto h = residual.to(acc);
    const auto variance = h.pow(2).mean(-1, /*keepdim=*/true);
    const auto normed = (h * at::rsqrt(variance + eps)).to(x.scalar_type());
    x.copy_(normed * weight);
    return {};
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::FusedAddRmsNorm);
