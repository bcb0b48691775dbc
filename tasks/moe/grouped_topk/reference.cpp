// moe/grouped_topk: DeepSeek-V3's router as vLLM's Python fallback writes it, and inputs whose distinct
// biased scores (and group scores) stay far enough apart that fp32 ranks them as float64 does.
#include <algorithm>
#include <cmath>
#include <limits>

#include "reference/task_code.hpp"

namespace {

// The smallest gap make_inputs leaves between two biased scores, or two group scores, that are not equal:
// fp32 rounding (a sigmoid through __expf, an add) moves a score by a few 1e-7, so a kernel that ranks
// fp32 values agrees with the float64 oracle on every pair.
constexpr double kSpacing = 1e-5;

class GroupedTopk final : public d2k::TaskCode {
 public:
  d2k::TensorMap reference(d2k::TensorMap& inputs, const d2k::Scalars& scalars) const override {
    const at::Tensor& logits = inputs.at("logits");
    const at::Tensor& bias = inputs.at("bias");
    const int64_t T = logits.size(0), E = logits.size(1), k = scalars.axis("k");
    const int64_t groups = scalars.i("num_expert_group"), keep = scalars.i("topk_group");
    const auto scores = logits.sigmoid();
    const auto choice = scores + bias.unsqueeze(0);
    const auto group_scores = std::get<0>(choice.view({T, groups, E / groups}).topk(2, -1)).sum(-1);
    // torch.topk leaves the order of equal values unspecified; a stable descending sort keeps them in
    // index order, the task's (and vLLM's kernel's) rule for groups and for experts.
    const auto kept = std::get<1>(at::sort(group_scores, /*stable=*/true, /*dim=*/-1, /*descending=*/true)).narrow(-1, 0, keep);
    const auto group_mask = at::zeros({T, groups}, logits.options().dtype(at::kBool)).scatter_(1, kept, true);
    const auto expert_mask = group_mask.unsqueeze(-1).expand({T, groups, E / groups}).reshape({T, E});
    const auto masked = choice.masked_fill(~expert_mask, -std::numeric_limits<double>::infinity());
    const auto ids = std::get<1>(at::sort(masked, /*stable=*/true, /*dim=*/-1, /*descending=*/true)).narrow(-1, 0, k);
    auto weights = scores.gather(1, ids);
    if (scalars.i("renormalize") != 0) weights = weights / weights.sum(-1, /*keepdim=*/true);
    weights = weights * scalars.f("routed_scaling_factor");
    return {{"weights", weights.contiguous()}, {"ids", ids.to(at::kInt)}};
  }

  // The task.toml distributions (normal, or ties on a grid), then every pair of distinct biased scores in
  // a row, and of distinct group scores, moved at least kSpacing apart by redrawing one logit of each pair
  // that is closer. Equal scores (equal logits and biases) stay: they are the ties the rule decides.
  std::optional<d2k::TensorMap> make_inputs(const d2k::Task& task, const d2k::Workload& workload,
                                            at::Generator& generator) const override {
    const int64_t T = workload.axes.at("T"), E = workload.axes.at("E");
    int64_t groups = 8;
    for (const auto& [spec, value] : d2k::scalars_of(task, workload))
      if (spec->name == "num_expert_group") groups = static_cast<int64_t>(value);
    const auto logits_init = d2k::init_of(*task.find_input("logits"), workload);
    const auto bias_init = d2k::init_of(*task.find_input("bias"), workload);
    at::Tensor logits = draw(logits_init, {T, E}, generator, workload);
    const at::Tensor bias = draw(bias_init, {E}, generator, workload);
    const int64_t per_group = E / groups;
    // Only the rows that had a redraw are looked at again.
    at::Tensor rows = at::arange(T, at::kLong);
    for (int round = 0; rows.numel() > 0; ++round) {
      at::Tensor sub = logits.index_select(0, rows);
      const int64_t R = rows.numel();
      const auto choice = sub.to(at::kDouble).sigmoid() + bias.to(at::kDouble).unsqueeze(0);
      // Experts: neighbours in sorted order closer than the spacing, and not equal.
      const auto [sorted, order] = at::sort(choice, /*stable=*/true, /*dim=*/-1, /*descending=*/false);
      const auto gap = sorted.narrow(1, 1, E - 1) - sorted.narrow(1, 0, E - 1);
      auto redraw = at::zeros({R, E}, at::kBool);
      redraw.scatter_(1, order.narrow(1, 1, E - 1), (gap > 0) & (gap < kSpacing));
      // Groups: two group scores closer than the spacing whose two best scores are not both equal.
      if (groups > 1) {
        const auto [top, where] = choice.view({R, groups, per_group}).topk(2, -1);
        const auto score = top.sum(-1);
        const auto close = (score.unsqueeze(2) - score.unsqueeze(1)).abs() < kSpacing;
        const auto same = (top.unsqueeze(2) == top.unsqueeze(1)).all(-1);
        const auto bad_group = (close & ~same).any(-1);  // a group is never "close but not same" to itself
        const auto best = where.select(-1, 0) + at::arange(groups, at::kLong).unsqueeze(0) * per_group;
        redraw.scatter_(1, best, bad_group | redraw.gather(1, best));
      }
      const int64_t n = redraw.sum().item<int64_t>();
      if (n == 0) break;
      if (round == 1000)
        d2k::fail("moe/grouped_topk: workload '{}': {} scores still closer than {} after {} redraws", workload.name, n,
                  kSpacing, round);
      sub.masked_scatter_(redraw, draw(logits_init, {n}, generator, workload));
      logits.index_copy_(0, rows, sub);
      rows = rows.masked_select(redraw.any(1));
    }
    return d2k::TensorMap{{"logits", logits}, {"bias", bias}};
  }

 private:
  static at::Tensor draw(const d2k::InputInit& init, at::IntArrayRef shape, at::Generator& generator,
                         const d2k::Workload& workload) {
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    auto values = at::normal(init.mean, init.std, shape, generator, f64);
    if (init.dist == "ties" && init.nudge != 0)
      d2k::fail("moe/grouped_topk: workload '{}': make_inputs draws ties without nudge (nudge {})", workload.name, init.nudge);
    if (init.dist == "ties") values = at::round(values / init.quantum) * init.quantum;
    else if (init.dist != "normal")
      d2k::fail("moe/grouped_topk: workload '{}': make_inputs draws normal or ties values, not '{}'", workload.name, init.dist);
    return values.to(at::kFloat);
  }
};

}  // namespace

D2K_REGISTER_TASK(GroupedTopk);
