// Eager reference for moe/sum_reduce, as a MoE layer's PyTorch fallback writes it (SGLang's
// moe_sum_reduce_torch_compile, without the compile): out = x.sum(dim=1) * routed_scaling_factor. On bf16
// inputs the sum accumulates in fp32 and is rounded to bf16, then the product is rounded again; with
// float64 inputs (the oracle) nothing is rounded.
#include "reference/task_code.hpp"

namespace d2k {
namespace {

class SumReduce : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override {
    const at::Tensor& x = inputs.at("x");
    return {{"out", x.sum(1) * scalars.f("routed_scaling_factor")}};
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::SumReduce);
