// The timed calls' patches (core/call_patch.hpp): reproducible, different per call, within rows,
// distinct elements, their own inverse.
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "core/call_patch.hpp"

using namespace d2k;

namespace {

WireTensor tensor(std::vector<int64_t> shape, std::vector<int64_t> strides, bool perturb = true, int64_t relabel = 0) {
  return WireTensor{.name = "t", .dtype = DType::f32, .shape = std::move(shape), .strides = std::move(strides),
                    .perturb = perturb, .relabel = relabel};
}

// The column pairs a relabelled input's swaps make in `row` (offsets within the row, for unit column strides).
std::set<std::pair<int64_t, int64_t>> pairs_in_row(const std::vector<ElementSwap>& patch, int input, int64_t row,
                                                   int64_t row_stride) {
  std::set<std::pair<int64_t, int64_t>> pairs;
  for (const auto& swap : patch) {
    if (swap.input != input || swap.a / row_stride != row) continue;
    EXPECT_EQ(swap.b / row_stride, row) << "a relabel swap across rows";
    pairs.emplace(std::min(swap.a, swap.b) % row_stride, std::max(swap.a, swap.b) % row_stride);
  }
  return pairs;
}

}  // namespace

TEST(CallPatch, TheSameSeedAndCallGiveTheSamePatchAndAnotherCallAnother) {
  const std::vector<WireTensor> inputs = {tensor({64, 128}, {128, 1})};
  const auto a = call_patch(42, 3, inputs, 8);
  const auto b = call_patch(42, 3, inputs, 8);
  ASSERT_EQ(a.size(), 8u);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].a == b[i].a && a[i].b == b[i].b);
  const auto other_call = call_patch(42, 4, inputs, 8);
  const auto other_seed = call_patch(43, 3, inputs, 8);
  EXPECT_NE(a[0].a, other_call[0].a);
  EXPECT_NE(a[0].a, other_seed[0].a);
}

TEST(CallPatch, SwapsStayWithinARowWithDistinctElementsAndHonourStrides) {
  // 10 rows of 6 columns, rows 8 elements apart, columns 1 apart.
  const std::vector<WireTensor> inputs = {tensor({10, 6}, {8, 1}), tensor({5}, {1}, false)};
  for (int64_t call = 0; call < 50; ++call) {
    const auto patch = call_patch(7, call, inputs, 8);
    EXPECT_EQ(patch.size(), 8u);
    std::set<int64_t> used;
    for (const auto& swap : patch) {
      EXPECT_EQ(swap.input, 0) << "the input that may not be perturbed was";
      EXPECT_EQ(swap.a / 8, swap.b / 8) << "a swap across rows";
      EXPECT_LT(swap.a % 8, 6);
      EXPECT_LT(swap.b % 8, 6);
      EXPECT_NE(swap.a, swap.b);
      EXPECT_TRUE(used.insert(swap.a).second);
      EXPECT_TRUE(used.insert(swap.b).second);
    }
  }
}

TEST(CallPatch, ATensorWithRowsOfOneIsOneRowAndATinyTensorGetsFewerSwaps) {
  const auto column = call_patch(1, 0, {tensor({12, 1}, {1, 1})}, 8);
  EXPECT_LE(column.size(), 6u);  // 12 elements: six disjoint pairs at most, and random draws may miss the last
  EXPECT_GE(column.size(), 4u);
  EXPECT_TRUE(call_patch(1, 0, {tensor({1}, {1})}, 8).empty());
  EXPECT_TRUE(call_patch(1, 0, {tensor({0, 4}, {4, 1})}, 8).empty());
}

TEST(CallPatch, ApplyingAPatchTwiceRestoresTheTensor) {
  const std::vector<WireTensor> inputs = {tensor({16, 16}, {16, 1})};
  std::vector<float> values(256);
  std::iota(values.begin(), values.end(), 0.0f);
  const auto original = values;
  const auto patch = call_patch(9, 1, inputs, 8);
  apply_swaps(patch, 0, values.data(), sizeof(float));
  EXPECT_NE(values, original);
  int moved = 0;
  for (std::size_t i = 0; i < values.size(); ++i) moved += values[i] != original[i];
  EXPECT_EQ(moved, 16);
  apply_swaps(patch, 0, values.data(), sizeof(float));
  EXPECT_EQ(values, original);
}

TEST(CallPatch, RelabelSwapsTheSameColumnPairsInEveryRowAndInEveryInputRelabelledAlike) {
  // Logits [6, 64] in rows 70 apart, a bias [64], both in blocks of 16; a third input with another block.
  const std::vector<WireTensor> inputs = {tensor({6, 64}, {70, 1}, true, 16), tensor({64}, {1}, true, 16),
                                          tensor({6, 64}, {64, 1}, true, 8)};
  for (int64_t call = 0; call < 20; ++call) {
    const auto patch = call_patch(11, call, inputs, 8);
    const auto bias = pairs_in_row(patch, 1, 0, 64);
    EXPECT_EQ(bias.size(), 32u) << "few rows: every position of every block is paired";
    for (const auto& [a, b] : bias) EXPECT_EQ(a / 16, b / 16) << "a pair across blocks: " << a << ", " << b;
    for (int64_t row = 0; row < 6; ++row) EXPECT_EQ(pairs_in_row(patch, 0, row, 70), bias) << "row " << row;
    EXPECT_NE(pairs_in_row(patch, 2, 0, 64), bias) << "another block size draws its own pairs";
    EXPECT_NE(pairs_in_row(call_patch(11, call + 1, inputs, 8), 1, 0, 64), bias) << "the next call relabels anew";
  }
}

TEST(CallPatch, InputsRelabelledAlikeGetTheSamePairsWhateverTheirRowCounts) {
  // Logits [4096, 64] and a bias [64] in blocks of 16: the logits' row count bounds the pairs to
  // kMostRelabelSwaps / 4096 = 16 of the 32, and the bias, one row, must get those 16, not all 32: else
  // a logit is paired with another expert's bias (the false alarms of 2026-12-02).
  const std::vector<WireTensor> inputs = {tensor({4096, 64}, {64, 1}, true, 16), tensor({64}, {1}, true, 16)};
  for (int64_t call = 0; call < 5; ++call) {
    const auto patch = call_patch(21, call, inputs, 8);
    const auto bias = pairs_in_row(patch, 1, 0, 64);
    EXPECT_EQ(bias.size(), 16u);
    EXPECT_EQ(pairs_in_row(patch, 0, 0, 64), bias);
    EXPECT_EQ(pairs_in_row(patch, 0, 4095, 64), bias);
  }
}

TEST(CallPatch, RelabelKeepsAManyRowInputsSwapsBoundedButAtLeastTheSwapsAsked) {
  const std::vector<WireTensor> inputs = {tensor({16384, 256}, {256, 1}, true, 32)};
  const auto patch = call_patch(5, 0, inputs, 8);
  EXPECT_EQ(patch.size(), 8u * 16384) << "8 column pairs (the swaps asked) in each of 16384 rows";
  const auto medium = call_patch(5, 0, {tensor({1024, 256}, {256, 1}, true, 32)}, 8);
  EXPECT_EQ(medium.size(), 64u * 1024) << "kMostRelabelSwaps / rows = 64 column pairs";
}

TEST(CallPatch, ARelabelPatchAppliedTwiceRestoresTheTensorAndMovesWholeColumns) {
  const std::vector<WireTensor> inputs = {tensor({4, 8}, {8, 1}, true, 4)};
  std::vector<float> values(32);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 8; ++c) values[r * 8 + c] = static_cast<float>(100 * r + c);
  const auto original = values;
  const auto patch = call_patch(3, 2, inputs, 8);
  apply_swaps(patch, 0, values.data(), sizeof(float));
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 8; ++c) {
      const float moved = values[r * 8 + c];
      EXPECT_EQ(static_cast<int>(moved) / 100, r) << "a value left its row";
      EXPECT_EQ(static_cast<int>(moved) % 100 / 4, c / 4) << "a value left its block";
      EXPECT_EQ(static_cast<int>(moved) % 100, static_cast<int>(values[c]) % 100) << "rows relabelled differently";
    }
  }
  apply_swaps(patch, 0, values.data(), sizeof(float));
  EXPECT_EQ(values, original);
}
