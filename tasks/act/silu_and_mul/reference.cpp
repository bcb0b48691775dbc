// Eager reference for act/silu_and_mul, as a gated MLP writes it in PyTorch (vLLM's SiluAndMul
// forward_native): d = x.shape[-1] // 2; F.silu(x[..., :d]) * x[..., d:]. On bf16 inputs silu's result
// is rounded to bf16 before the product (two roundings, as vLLM's kernel); with float64 inputs (the
// oracle) nothing is rounded.
#include "reference/task_code.hpp"

namespace d2k {
namespace {

class SiluAndMul : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars&) const override {
    const at::Tensor& x = inputs.at("x");
    const int64_t d = x.size(-1) / 2;
    return {{"out", at::silu(x.narrow(-1, 0, d)) * x.narrow(-1, d, d)}};
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::SiluAndMul);
