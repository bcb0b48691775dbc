// moe/topk_softmax: the router of a Mixtral or Qwen3-MoE layer, as its eager PyTorch code writes it.
#include "reference/task_code.hpp"

namespace {

class TopkSoftmax final : public d2k::TaskCode {
 public:
  d2k::TensorMap reference(d2k::TensorMap& inputs, const d2k::Scalars& scalars) const override {
    const at::Tensor& logits = inputs.at("logits");
    const int64_t k = scalars.axis("k");
    auto acc = logits.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    auto probs = at::softmax(logits.to(acc), -1);
    // torch.topk leaves the order of equal values unspecified; a stable descending sort keeps equal
    // probabilities in index order, which is the task's tie rule. Equal logits give bit-identical
    // probabilities (the same exp of the same difference over the same sum), so the ties survive.
    auto [sorted, order] = at::sort(probs, /*stable=*/true, /*dim=*/-1, /*descending=*/true);
    auto weights = sorted.narrow(-1, 0, k);
    if (scalars.i("renormalize") != 0) weights = weights / weights.sum(-1, /*keepdim=*/true);
    return {{"weights", weights.contiguous()}, {"ids", order.narrow(-1, 0, k).to(at::kInt)}};
  }
};

}  // namespace

D2K_REGISTER_TASK(TopkSoftmax);
