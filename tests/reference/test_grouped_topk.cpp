// moe/grouped_topk against vLLM's rules: a hand-computed case of tied groups and tied experts, the
// spacing make_inputs keeps between distinct scores (so that an fp32 kernel ranks as the float64 oracle),
// ties at the thresholds in the ties workloads, and what the check accepts and rejects.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "core/task_loader.hpp"
#include "reference/check.hpp"
#include "reference/inputs.hpp"

namespace d2k {
namespace {

const std::filesystem::path kTasks = std::filesystem::path(D2K_ROOT_DIR) / "tasks";

struct GroupedTopk : ::testing::Test {
  Task task = load_task(kTasks, std::string("moe/grouped_topk"));
  std::unique_ptr<TaskCode> code = make_task_code("moe/grouped_topk");

  const Workload& workload(const std::string& name) const {
    const Workload* w = task.find_workload(name);
    if (!w) throw std::runtime_error("no workload " + name);
    return *w;
  }
  TensorMap reference(TensorMap inputs, const Scalars& scalars) const { return code->reference(inputs, scalars); }
  TensorMap oracle(const TensorMap& inputs, const Scalars& scalars) const {
    return reference({{"logits", inputs.at("logits").to(at::kDouble)}, {"bias", inputs.at("bias").to(at::kDouble)}}, scalars);
  }
};

TEST_F(GroupedTopk, TiedGroupsAndTiedExpertsGoToTheLowerIndex) {
  // E 8 in 4 groups of 2, keep 2, k 3, no bias. Group 0: logits 3, 3 (score 2 sigmoid(3)); groups 1 and 2:
  // 2, 2 each (equal scores, 2 sigmoid(2)); group 3: 0, -1. Kept: group 0, and group 1 over its equal
  // group 2. Experts: 0 and 1 (equal, index order), then 2 over its equal 3.
  Scalars scalars;
  scalars.values = {{"num_expert_group", 4}, {"topk_group", 2}, {"renormalize", 1}, {"routed_scaling_factor", 2.5}};
  scalars.axes = {{"T", 1}, {"E", 8}, {"k", 3}};
  const auto logits = at::tensor({3.0f, 3.0f, 2.0f, 2.0f, 2.0f, 2.0f, 0.0f, -1.0f}).view({1, 8});
  const auto bias = at::zeros({8}, at::kFloat);
  for (const auto type : {at::kFloat, at::kDouble}) {
    const auto out = reference({{"logits", logits.to(type)}, {"bias", bias.to(type)}}, scalars);
    EXPECT_TRUE(out.at("ids").equal(at::tensor({0, 1, 2}, at::kInt).view({1, 3}))) << out.at("ids");
    const double s3 = 1.0 / (1.0 + std::exp(-3.0)), s2 = 1.0 / (1.0 + std::exp(-2.0)), sum = 2 * s3 + s2;
    const auto w = out.at("weights").to(at::kDouble);
    EXPECT_NEAR(w[0][0].item<double>(), s3 / sum * 2.5, 1e-6);
    EXPECT_NEAR(w[0][2].item<double>(), s2 / sum * 2.5, 1e-6);
  }
}

TEST_F(GroupedTopk, TheBiasChoosesAndTheUnbiasedScoreWeighs) {
  // Two groups of 2, keep 1, k 1: expert 3's logit is lower but its bias lifts group 1 and expert 3 above.
  Scalars scalars;
  scalars.values = {{"num_expert_group", 2}, {"topk_group", 1}, {"renormalize", 0}, {"routed_scaling_factor", 1.0}};
  scalars.axes = {{"T", 1}, {"E", 4}, {"k", 1}};
  const auto out = reference({{"logits", at::tensor({1.0, 0.5, 0.0, 0.25}, at::kDouble).view({1, 4})},
                              {"bias", at::tensor({0.0, 0.0, 0.0, 0.5}, at::kDouble)}},
                             scalars);
  EXPECT_EQ(out.at("ids").item<int>(), 3);
  EXPECT_DOUBLE_EQ(out.at("weights").item<double>(), 1.0 / (1.0 + std::exp(-0.25)));  // sigmoid, no bias
}

// The biased scores [T, E] in float64, and the group scores [T, G].
std::pair<at::Tensor, at::Tensor> scores_of(const TensorMap& inputs, int64_t groups) {
  const auto c = inputs.at("logits").to(at::kDouble).sigmoid() + inputs.at("bias").to(at::kDouble).unsqueeze(0);
  const auto g = std::get<0>(c.view({c.size(0), groups, -1}).topk(2, -1)).sum(-1);
  return {c, g};
}

TEST_F(GroupedTopk, DistinctScoresAreAtLeastTheSpacingApartAndTheTiesWorkloadsTieAtTheThresholds) {
  for (const std::string name : {"deepseek-v3-T128", "deepseek-v3-T33-ties", "moonlight-16b-T29", "deepseek-v2-grouping-T777"}) {
    const auto& w = workload(name);
    const auto scalars = scalars_for(task, w);
    const auto inputs = make_inputs(task, *code, w, 11);
    const auto [c, g] = scores_of(inputs, scalars.i("num_expert_group"));
    const auto sorted = std::get<0>(c.sort(-1));
    const auto gaps = sorted.narrow(1, 1, c.size(1) - 1) - sorted.narrow(1, 0, c.size(1) - 1);
    EXPECT_EQ(((gaps > 0) & (gaps < 1e-5)).sum().item<int64_t>(), 0) << name;
  }
  // The ties workload: equal scores at the 4th group or the 8th expert in most rows.
  const auto& w = workload("deepseek-v3-T4096-ties");
  const auto inputs = make_inputs(task, *code, w, 13);
  const auto [c, g] = scores_of(inputs, 8);
  const auto groups = std::get<0>(g.sort(-1, /*descending=*/true));
  const auto group_tie = groups.select(1, 3).eq(groups.select(1, 4));
  const auto out = oracle(inputs, scalars_for(task, w));
  const auto ids = out.at("ids").to(at::kLong);
  const auto eighth = c.gather(1, ids.narrow(1, 7, 1)).squeeze(1);
  // The 9th kept expert's score: mask the chosen and the dropped groups' experts.
  auto masked = c.clone();
  masked.scatter_(1, ids, -1e300);
  const auto kept_groups = std::get<1>(g.sort(/*stable=*/true, -1, /*descending=*/true)).narrow(1, 0, 4);
  const auto group_of = at::arange(256, at::kLong).floor_divide(32);
  const auto kept = (group_of.view({1, 1, 256}) == kept_groups.unsqueeze(-1)).any(1);
  masked.masked_fill_(~kept, -1e300);
  const auto ninth = std::get<0>(masked.max(-1));
  const double groups_tied = group_tie.to(at::kDouble).mean().item<double>();
  const double experts_tied = eighth.eq(ninth).to(at::kDouble).mean().item<double>();
  std::cout << "ties at the 4th group: " << groups_tied << ", at the 8th expert: " << experts_tied << "\n";
  EXPECT_GT(groups_tied, 0.3);  // 0.48 on seed 13
  EXPECT_GT(experts_tied, 0.7);  // 0.88
}

struct Variant {
  std::string what;
  bool passes;
  std::string fragment;
};

TEST_F(GroupedTopk, TheCheckAcceptsFp32AndRejectsLowerPrecisionBiasedWeightsAndAnotherOrder) {
  for (const std::string name : {"deepseek-v3-T37", "deepseek-v3-T33-ties"}) {
    const auto& w = workload(name);
    const auto scalars = scalars_for(task, w);
    const auto inputs = make_inputs(task, *code, w, 17);
    const auto want = oracle(inputs, scalars);
    const auto fp32 = reference(inputs, scalars);
    // Scores in bf16 arithmetic (sigmoid and the bias add rounded to bf16), the rest as the reference.
    auto rounded = reference({{"logits", inputs.at("logits").to(at::kBFloat16)}, {"bias", inputs.at("bias").to(at::kBFloat16)}},
                             scalars);
    rounded["weights"] = rounded["weights"].to(at::kFloat);
    // Weights from the biased scores.
    const auto [c, g] = scores_of(inputs, 8);
    auto biased = fp32;
    const auto chosen = c.gather(1, fp32.at("ids").to(at::kLong));
    biased["weights"] = (chosen / chosen.sum(-1, true) * 2.5).to(at::kFloat);
    // The right experts in ascending index order (a set, not the order).
    auto ascending = fp32;
    const auto [ids_sorted, perm] = fp32.at("ids").sort(-1);
    ascending["ids"] = ids_sorted;
    ascending["weights"] = fp32.at("weights").gather(1, perm);
    const std::vector<std::pair<Variant, TensorMap>> variants = {
        {{"fp32, as the eager path computes it", true, ""}, fp32},
        {{"scores in bf16", false, "'"}, rounded},
        {{"weights from the biased scores", false, "'weights'"}, biased},
        {{"ids in index order", false, "'ids'"}, ascending},
    };
    for (const auto& [variant, got] : variants) {
      const auto verdict = check(task, *code, scalars, got, want, {});
      EXPECT_EQ(verdict.status == Status::passed, variant.passes) << name << ", " << variant.what << ": " << verdict.message;
      if (!variant.passes) EXPECT_NE(verdict.message.find(variant.fragment), std::string::npos) << verdict.message;
    }
  }
}

}  // namespace
}  // namespace d2k
