// moe/align_block_size against vLLM's semantics (a hand-computed case), its routing inputs, and the
// `segments` check kind: it accepts any order inside an expert's segment and rejects every way a
// sorted_token_ids, expert_ids or num_tokens_post_pad can be wrong, each with a message that says how.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <stdexcept>

#include "core/task_loader.hpp"
#include "reference/check.hpp"
#include "reference/compare_segments.hpp"
#include "reference/inputs.hpp"

namespace d2k {
namespace {

const std::filesystem::path kTasks = std::filesystem::path(D2K_ROOT_DIR) / "tasks";

struct AlignBlockSize : ::testing::Test {
  Task task = load_task(kTasks, std::string("moe/align_block_size"));
  std::unique_ptr<TaskCode> code = make_task_code("moe/align_block_size");

  const Workload& workload(const std::string& name) const {
    const Workload* w = task.find_workload(name);
    if (!w) throw std::runtime_error("no workload " + name);
    return *w;
  }
  TensorMap reference(TensorMap inputs, const Scalars& scalars) const { return code->reference(inputs, scalars); }
  static TensorMap clone(const TensorMap& outputs) {
    TensorMap copy;
    for (const auto& [name, t] : outputs) copy[name] = t.clone();
    return copy;
  }
  // A drawn smoke workload, its scalars and the oracle's outputs.
  struct Case {
    Scalars scalars;
    TensorMap inputs, want;
  };
  Case drawn(const std::string& name, uint64_t seed = 7) const {
    Case c;
    c.scalars = scalars_for(task, workload(name));
    c.inputs = make_inputs(task, *code, workload(name), seed);
    c.want = reference(c.inputs, c.scalars);
    return c;
  }
  Verdict verdict(const Case& c, const TensorMap& got) const { return check(task, *code, c.scalars, got, c.want, {}); }
};

TEST_F(AlignBlockSize, TheReferenceGivesVllmsLayoutOnAHandComputedCase) {
  // T 3, k 2, E 4, B 4: expert 0 gets entries {0, 4}, expert 1 none, expert 2 {1, 2, 5}, expert 3 {3}.
  // Padded counts 4, 0, 4, 4: total 12; capacity 6 + 4 * 3 = 18 positions, ceil(18 / 4) = 5 blocks.
  Scalars scalars;
  scalars.values = {{"num_experts", 4}, {"block_size", 4}};
  scalars.axes = {{"T", 3}, {"k", 2}, {"E", 4}, {"B", 4}};
  const auto ids = at::tensor({0, 2, 2, 3, 0, 2}, at::kInt).view({3, 2});
  const auto out = reference({{"topk_ids", ids}}, scalars);
  const std::vector<int> sorted = {0, 4, 6, 6, 1, 2, 5, 6, 3, 6, 6, 6, 6, 6, 6, 6, 6, 6};
  EXPECT_TRUE(out.at("sorted_token_ids").equal(at::tensor(sorted, at::kInt)));
  EXPECT_TRUE(out.at("expert_ids").equal(at::tensor({0, 2, 3, 0, 0}, at::kInt)));  // the tail holds 0
  EXPECT_TRUE(out.at("num_tokens_post_pad").equal(at::tensor({12}, at::kInt)));
}

TEST_F(AlignBlockSize, EveryWorkloadDrawsKDistinctExpertsPerTokenInItsRange) {
  for (const auto& w : task.workloads) {
    if (w.axes.at("T") > 1024) continue;  // the large ones draw the same way; keep the test fast
    const auto ids = make_inputs(task, *code, w, 3).at("topk_ids");
    const auto init = init_of(*task.find_input("topk_ids"), w);
    const auto k = w.axes.at("k");
    EXPECT_EQ(ids.scalar_type(), at::kInt);
    EXPECT_EQ(ids.size(1), k);
    EXPECT_GE(ids.min().item<int>(), init.low) << w.name;
    EXPECT_LT(ids.max().item<int>(), init.high) << w.name;
    for (int64_t t = 0; t < ids.size(0); ++t) {
      const auto row = ids[t];
      EXPECT_EQ(std::get<0>(at::_unique(row)).numel(), k) << w.name << " token " << t;
    }
    EXPECT_NO_THROW(reference({{"topk_ids", ids}}, scalars_for(task, w))) << w.name;
  }
}

TEST_F(AlignBlockSize, LoadsAreSkewedLikeARoutersAndNotUniform) {
  const auto ids = make_inputs(task, *code, workload("qwen3-30b-T512"), 5).at("topk_ids");
  const auto counts = at::bincount(ids.flatten().to(at::kLong), {}, 128).to(at::kDouble);
  const double mean = counts.mean().item<double>(), max = counts.max().item<double>();
  EXPECT_GT(max, 2.0 * mean);  // a uniform draw of 4096 entries over 128 experts stays near 1.3x the mean
}

TEST_F(AlignBlockSize, TheCheckAcceptsAnyOrderInsideASegment) {
  const auto c = drawn("qwen3-30b-T37");
  auto got = clone(c.want);
  // Reverse the entries of every expert's segment (each segment: its blocks, entries before pads).
  const auto labels = c.want.at("expert_ids");
  auto sorted = got.at("sorted_token_ids");
  const int64_t N = 37 * 8, B = 64, total = c.want.at("num_tokens_post_pad").item<int>();
  for (int64_t s = 0; s < total; s += B) {
    int64_t e = s;
    while (e < total && labels[e / B].item<int>() == labels[s / B].item<int>()) e += B;
    const auto segment = sorted.narrow(0, s, e - s);
    const auto entries = segment.lt(N).sum().item<int64_t>();
    segment.narrow(0, 0, entries).copy_(segment.narrow(0, 0, entries).flip(0));
    s = e - B;
  }
  ASSERT_FALSE(sorted.equal(c.want.at("sorted_token_ids")));
  const auto v = verdict(c, got);
  EXPECT_EQ(v.status, Status::passed) << v.message;
}

struct Mistake {
  std::string what;
  std::function<void(TensorMap&, int64_t N)> apply;
  std::string fragment;
};

TEST_F(AlignBlockSize, TheCheckRejectsEveryWrongAnswerAndSaysWhy) {
  const auto c = drawn("qwen3-30b-T37");
  // Positions 0 and 1 are entries of the first expert's segment (every busy expert holds at least one;
  // the first busy one at 0). Find a segment with two entries and a pad, and one other segment.
  const auto& want_sorted = c.want.at("sorted_token_ids");
  const int64_t N = 37 * 8;
  int64_t two = -1;  // a segment start with at least two entries and a pad
  for (int64_t s = 0; s < c.want.at("num_tokens_post_pad").item<int>(); s += 64) {
    if (want_sorted[s + 1].item<int>() < N && want_sorted[s + 63].item<int>() == N) {
      two = s;
      break;
    }
  }
  ASSERT_GE(two, 0);
  const int64_t other = two == 0 ? 64 : 0;
  const std::vector<Mistake> mistakes = {
      {"a duplicated entry", [&](TensorMap& g, int64_t) { g["sorted_token_ids"][two + 1] = g["sorted_token_ids"][two].item<int>(); },
       "appears 2 times"},
      {"a missing entry (a pad in its place)", [&](TensorMap& g, int64_t n) { g["sorted_token_ids"][two + 1] = static_cast<int>(n); },
       "is missing"},
      {"a wrong pad value (T instead of T*k)",
       [&](TensorMap& g, int64_t) { auto s = g["sorted_token_ids"]; s.masked_fill_(s.eq(N), 37); }, "appears"},
      {"a pad value outside every entry", [&](TensorMap& g, int64_t) { auto s = g["sorted_token_ids"]; s.masked_fill_(s.eq(N), N + 1); },
       "neither an entry of the oracle's nor the pad"},
      {"a pad in the middle of a segment",
       [&](TensorMap& g, int64_t) {
         auto s = g["sorted_token_ids"];
         const auto entry = s[two].item<int>();
         s[two] = s[two + 63].item<int>();
         s[two + 63] = entry;
       },
       "holds the pad"},
      {"an entry in another expert's segment",
       [&](TensorMap& g, int64_t) {
         auto s = g["sorted_token_ids"];
         const auto a = s[two].item<int>();
         s[two] = s[other].item<int>();
         s[other] = a;
       },
       "which belongs to the segment labelled"},
      {"a wrong expert id", [&](TensorMap& g, int64_t) { g["expert_ids"][0] = g["expert_ids"][0].item<int>() + 1; }, "'expert_ids'"},
      {"expert ids past the used blocks left unwritten (-1)",
       [&](TensorMap& g, int64_t) {
         auto b = g["expert_ids"];
         const auto used = c.want.at("num_tokens_post_pad").item<int>() / 64;
         b.narrow(0, used, b.numel() - used).fill_(-1);
       },
       "'expert_ids'"},
      {"a wrong num_tokens_post_pad", [&](TensorMap& g, int64_t) { g["num_tokens_post_pad"][0] = g["num_tokens_post_pad"][0].item<int>() - 64; },
       "'num_tokens_post_pad'"},
      {"the tail of sorted_token_ids left unwritten (-1)",
       [&](TensorMap& g, int64_t) {
         auto s = g["sorted_token_ids"];
         const auto total = c.want.at("num_tokens_post_pad").item<int>();
         s.narrow(0, total, s.numel() - total).fill_(-1);
       },
       "only the first"},
  };
  for (const auto& mistake : mistakes) {
    auto got = clone(c.want);
    mistake.apply(got, N);
    const auto v = verdict(c, got);
    EXPECT_NE(v.status, Status::passed) << mistake.what;
    EXPECT_NE(v.message.find(mistake.fragment), std::string::npos) << mistake.what << ": " << v.message;
  }
}

TEST(CompareSegments, ARunOfBlocksOfOneLabelIsOneSegmentAndThePadStaysInPlace) {
  // Blocks of 2, labels 5 5 7: segment [0, 4) holds {10, 11, 12} then the pad 9; segment [4, 6) holds 13 then 9.
  const auto want = at::tensor({10, 11, 12, 9, 13, 9}, at::kInt);
  const auto labels = at::tensor({5, 5, 7}, at::kInt);
  const auto run = [&](std::vector<int> got) {
    return compare_segments("s", at::tensor(got, at::kInt), want, labels, 2, 9);
  };
  EXPECT_TRUE(run({12, 10, 11, 9, 13, 9}).passed);   // permuted across the two blocks of one segment
  EXPECT_FALSE(run({10, 11, 9, 12, 13, 9}).passed);  // the pad moved inside its segment
  EXPECT_FALSE(run({13, 11, 12, 9, 10, 9}).passed);  // entries swapped between segments
  const auto twice = run({10, 10, 12, 9, 13, 9});
  EXPECT_FALSE(twice.passed);
  EXPECT_EQ(twice.mismatches, 1);
  EXPECT_EQ(twice.worst_index, 1);
  EXPECT_NE(twice.detail.find("entry 10 appears 2 times"), std::string::npos) << twice.detail;
}

}  // namespace
}  // namespace d2k
