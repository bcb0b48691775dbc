// sample/top_k_top_p: the oracle's distribution against hand-computed cases of the task's rules (top-k
// first, ties at the k-th place and at the p boundary kept whole, k = 0 or V and p = 1 switch a filter
// off), the inputs' margins around p, the ties workload's straddling groups, and the eager reference.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/task_loader.hpp"
#include "reference/inputs.hpp"
#include "reference/sample_test.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

const std::filesystem::path kTasks = std::filesystem::path(D2K_ROOT_DIR) / "tasks";

struct TopKTopP : ::testing::Test {
  Task task = load_task(kTasks, std::string("sample/top_k_top_p"));
  std::unique_ptr<TaskCode> code = make_task_code("sample/top_k_top_p");

  at::Tensor distribution(const std::vector<double>& probs, int k, double p) const {
    TensorMap inputs{{"probs", at::tensor(probs, at::kDouble).view({1, -1})},
                     {"top_k", at::tensor({k}, at::kInt)},
                     {"top_p", at::tensor({p}, at::kDouble)}};
    return code->distribution(inputs, Scalars{}).at("token_ids")[0];
  }
  void expect(const at::Tensor& got, const std::vector<double>& want) const {
    ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i].item<double>(), want[i], 1e-12) << "token " << i;
  }
};

// Sorted: 0.3 (1), 0.2 (2), 0.2 (3), 0.15 (4), 0.1 (0), 0.05 (5).
const std::vector<double> kRow = {0.1, 0.3, 0.2, 0.2, 0.15, 0.05};

TEST_F(TopKTopP, TiesAtTheKthPlaceStayAndTopPRunsOnTheRenormalizedRest) {
  // k 2: the 2nd largest is 0.2, tied with token 3: K = {1, 2, 3}, mass 0.7; q = 3/7, 2/7, 2/7.
  // p 0.5: the mass above the 0.2 group is 3/7 < 0.5, so both stay (a cut by sorted position would
  // drop the second: 5/7 above it).
  expect(distribution(kRow, 2, 0.5), {0, 3.0 / 7, 2.0 / 7, 2.0 / 7, 0, 0});
  // p 0.4 <= 3/7: the top token alone.
  expect(distribution(kRow, 2, 0.4), {0, 1, 0, 0, 0, 0});
  // No top-p: K renormalized.
  expect(distribution(kRow, 2, 1.0), {0, 3.0 / 7, 2.0 / 7, 2.0 / 7, 0, 0});
  // k 4: K adds 0.15, mass 0.85; p 0.8: above 0.15 lies 0.7 / 0.85 = 0.82 >= 0.8, so it goes.
  expect(distribution(kRow, 4, 0.8), {0, 0.3 / 0.7, 0.2 / 0.7, 0.2 / 0.7, 0, 0});
  // Had top-p run on the original probabilities (SGLang's "joint" order), 0.7 < 0.8 would keep it.
  expect(distribution(kRow, 4, 0.83), {0, 0.3 / 0.85, 0.2 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0});
}

TEST_F(TopKTopP, KOfZeroOrVAndPOfOneSwitchTheFiltersOff) {
  for (int k : {0, -3, 6, 7}) expect(distribution(kRow, k, 1.0), kRow);
  // A token of probability 0 is never drawn, even with both filters off.
  expect(distribution({0.0, 0.25, 0.75, 0.0}, 0, 1.0), {0, 0.25, 0.75, 0});
  // A p below the top probability keeps the top token alone, and its ties with it.
  expect(distribution(kRow, 0, 1e-6), {0, 1, 0, 0, 0, 0});
  expect(distribution({0.4, 0.4, 0.2}, 0, 1e-6), {0.5, 0.5, 0});
}

// Every p lies at least 1e-4 away from each cumulative mass of its row's renormalized top-k set (but
// the top group's own 0), so fp32 rounding cannot move a token across the boundary.
TEST_F(TopKTopP, EveryPLiesAwayFromTheCumulativeMassesOfItsRow) {
  int straddled = 0;
  for (const auto& w : task.workloads) {
    // The smoke workloads and the tiny-p one (the large ones draw the same way; keep the test fast).
    if (!w.smoke && w.name.find("tiny") == std::string::npos) continue;
    const auto inputs = make_inputs(task, *code, w, 17);
    const auto probs = inputs.at("probs").to(at::kDouble);
    const auto top_k = inputs.at("top_k");
    const auto top_p = inputs.at("top_p");
    const int64_t vocab = probs.size(1);
    for (int64_t b = 0; b < probs.size(0); ++b) {
      const double p = top_p[b].item<double>();
      if (p >= 1) continue;
      const auto sorted = std::get<0>(probs[b].sort(0, true));
      int64_t k = top_k[b].item<int>();
      if (k <= 0 || k >= vocab) k = vocab;
      const double kth = sorted[k - 1].item<double>();
      const auto kept = sorted.masked_select(sorted >= kth);
      const auto q = kept / kept.sum();
      const auto* v = q.data_ptr<double>();
      double above = 0;
      for (int64_t i = 0; i < q.numel();) {
        int64_t j = i;
        while (j < q.numel() && v[j] == v[i]) ++j;
        if (i > 0) EXPECT_GT(std::abs(above - p), 1e-4 - 1e-9) << w.name << " row " << b;
        // A cut by sorted position keeps member m of the group while above + m q < p: it cuts inside a
        // group that the value rule keeps whole when above < p <= above + (size - 1) q.
        if (above < p && p <= above + static_cast<double>(j - i - 1) * v[i]) ++straddled;
        above += static_cast<double>(j - i) * v[i];
        i = j;
      }
    }
    if (w.name.find("tiny") != std::string::npos) {
      const auto d = code->distribution(inputs, scalars_for(task, w)).at("token_ids");
      // Rows with p < 1 (every fifth row has p = 1, no top-p) keep the top value's tokens alone.
      const auto filtered = top_p.lt(1);
      EXPECT_TRUE(d.gt(0).sum(1).masked_select(filtered).equal((probs == probs.amax(1, true)).sum(1).masked_select(filtered)))
          << w.name;
    }
  }
  EXPECT_GT(straddled, 3) << "the ties workload puts p inside tie groups' spans";
}

TEST_F(TopKTopP, TheEagerReferenceDrawsInTheSupportAndRepeatsForOneSeed) {
  const Workload& w = *task.find_workload("smoke-B64-V515-ties");
  auto inputs = make_inputs(task, *code, w, 3);
  auto scalars = scalars_for(task, w);
  const auto d = code->distribution(inputs, scalars).at("token_ids");
  const auto first = code->reference(inputs, scalars).at("token_ids");
  EXPECT_EQ(first.scalar_type(), at::kLong);
  EXPECT_TRUE(compare_sample("token_ids", first, d).passed);
  EXPECT_TRUE(code->reference(inputs, scalars).at("token_ids").equal(first));
  scalars.values["seed"] = 43;
  std::vector<at::Tensor> draws;
  for (int s = 0; s < 64; ++s) {
    scalars.values["seed"] = 1000 + s;
    draws.push_back(code->reference(inputs, scalars).at("token_ids"));
  }
  EXPECT_TRUE(compare_sample("token_ids", at::stack(draws), d.unsqueeze(0).expand({64, -1, -1})).passed);
}

}  // namespace
}  // namespace d2k
