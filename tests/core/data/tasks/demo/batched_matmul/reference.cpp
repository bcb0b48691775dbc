// demo/batched_matmul: a test fixture whose eager reference loops over the batch and whose library
// path is one batched call; both run on the cpu device.
#include "reference/task_code.hpp"

namespace {

class BatchedMatmul final : public d2k::TaskCode {
 public:
  d2k::TensorMap reference(d2k::TensorMap& inputs, const d2k::Scalars& scalars) const override {
    const at::Tensor& a = inputs.at("a");
    const at::Tensor& w = inputs.at("w");
    auto c = at::empty({a.size(0), a.size(1), w.size(2)}, a.options());
    for (int64_t b = 0; b < a.size(0); ++b) c[b].copy_(at::mm(a[b], w[b]));
    return {{"c", c}};
  }

  bool has_library() const override { return true; }
  d2k::TensorMap library(d2k::TensorMap& inputs, const d2k::Scalars& scalars) const override {
    return {{"c", at::matmul(inputs.at("a"), inputs.at("w"))}};
  }
};

}  // namespace

D2K_REGISTER_TASK(BatchedMatmul);
