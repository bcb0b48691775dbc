// attn/prefill_sliding_window against its definition and its originals: a hand-computed batch (W = 1: a
// query sees itself and the one key before it, FlashAttention's window_size_left, never a key further back
// or of another sequence); a window larger than every sequence gives attn/prefill_causal_gqa's reference
// exactly; torch's own flash kernel with the band mask agrees on o and lse; every workload's P is its band's
// area counted query by query. The tolerance accepts what a FlashAttention kernel computes (fp32 scores and
// softmax, bf16 probabilities) at head dims 128 and 64 and rejects the window off by one (W keys, not
// W + 1), the window ignored (plain causal), and a D-64 kernel that reads D-128 strides.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>

#include "core/task_loader.hpp"
#include "reference/check.hpp"
#include "attention_verdicts.hpp"
#include "reference/inputs.hpp"

namespace d2k {
namespace {

const std::filesystem::path kTasks = std::filesystem::path(D2K_ROOT_DIR) / "tasks";
const auto kF64 = at::TensorOptions().dtype(at::kDouble);
constexpr double kInf = std::numeric_limits<double>::infinity();

// What a candidate computes, and the mistakes it makes.
struct Candidate {
  bool round_p = true;          // p rounded to bf16 before p v (FlashAttention); the sum of the fp32 p
  bool sum_rounded_p = false;   // the sum taken over the bf16 p instead (the lse then carries its rounding)
  int64_t window_shift = 0;     // -1: the window off by one, keys i - W < j <= i (W keys, the models' count)
  bool window_ignored = false;  // plain causal attention
  bool strides_of_128 = false;  // a D-64 kernel reading q, k, v with the strides of D 128
};

struct PrefillSlidingWindow : ::testing::Test {
  Task task = load_task(kTasks, std::string("attn/prefill_sliding_window"));
  std::unique_ptr<TaskCode> code = make_task_code("attn/prefill_sliding_window");

  static Scalars scalars_of(const Workload& w, double scale) {
    Scalars scalars;
    scalars.axes = w.axes;
    scalars.values["softmax_scale"] = scale;
    scalars.values["window_left"] = static_cast<double>(w.axes.at("W"));
    return scalars;
  }
  static int64_t pairs_counted(int64_t length, int64_t window) {
    int64_t pairs = 0;
    for (int64_t i = 0; i < length; ++i) pairs += std::min(i, window) + 1;
    return pairs;
  }
  // A workload with these lengths (B, Lmin, Lmax), window, heads and head dim; T and P follow.
  Workload workload(int64_t count, int64_t shortest, int64_t longest, int64_t window, int64_t heads, int64_t kv_heads,
                    int64_t dim) const {
    Workload w = *task.find_workload("mistral-7b-B2-T137-W40");
    int64_t tokens = 0, pairs = 0;
    for (int64_t b = 0; b < count; ++b) {
      const int64_t length = count == 1 ? shortest : shortest + b * (longest - shortest) / (count - 1);
      tokens += length, pairs += pairs_counted(length, window);
    }
    w.axes = {{"T", tokens}, {"B", count}, {"Lmin", shortest}, {"Lmax", longest}, {"W", window},
              {"P", pairs},  {"Hq", heads}, {"Hkv", kv_heads},  {"D", dim}};
    w.scalars = {{"window_left", static_cast<double>(window)}};
    return w;
  }
  // The reference on these inputs, natively or in float64 (the oracle).
  TensorMap run(const TensorMap& inputs, const Scalars& scalars, bool wide) const {
    TensorMap copy;
    for (const auto& [name, tensor] : inputs)
      copy[name] = wide && at::isFloatingType(tensor.scalar_type()) ? tensor.to(at::kDouble) : tensor;
    return code->reference(copy, scalars);
  }

  // What a kernel hard-coded for D 128 reads from a D-64 [T, H, 64] tensor: row (t, h) at element
  // (t H + h) 128, i.e. row 2 (t H + h) of the 64-wide rows, and past the tensor's end whatever lies there
  // (zeros here).
  static at::Tensor read_with_strides_of_128(const at::Tensor& x) {
    const int64_t rows = x.size(0) * x.size(1);
    const at::Tensor flat = x.reshape({rows, x.size(2)});
    const at::Tensor index = at::arange(rows, at::TensorOptions().dtype(at::kLong)) * 2;
    const at::Tensor inside = index < rows;
    return flat.index_select(0, index.clamp_max(rows - 1)).mul(inside.unsqueeze(1)).view(x.sizes());
  }

  // A kernel's arithmetic, written out: per sequence and head, fp32 scores of the bf16 inputs, the band
  // mask, the row maximum, p = exp(s - max) in fp32 (rounded to bf16 for p v where FlashAttention rounds
  // it), the sum of the fp32 p, o = (p v) / sum rounded once, lse = max + log(sum).
  static TensorMap candidate(const TensorMap& inputs, double scale, int64_t window, const Candidate& how) {
    at::Tensor q = inputs.at("q").to(at::kFloat), k = inputs.at("k").to(at::kFloat), v = inputs.at("v").to(at::kFloat);
    if (how.strides_of_128) q = read_with_strides_of_128(q), k = read_with_strides_of_128(k), v = read_with_strides_of_128(v);
    const at::Tensor offsets = inputs.at("cu_seqlens").to(at::kLong);
    const int64_t tokens = q.size(0), heads = q.size(1), kv_heads = k.size(1), group = heads / kv_heads;
    at::Tensor o = at::empty({tokens, heads, q.size(2)}, at::TensorOptions().dtype(at::kBFloat16));
    at::Tensor lse = at::empty({heads, tokens}, at::TensorOptions().dtype(at::kFloat));
    const int64_t reach = how.window_ignored ? tokens : window + how.window_shift;
    for (int64_t b = 0; b + 1 < offsets.numel(); ++b) {
      const int64_t start = offsets[b].item<int64_t>(), length = offsets[b + 1].item<int64_t>() - start;
      const at::Tensor position = at::arange(length, at::TensorOptions().dtype(at::kLong));
      const at::Tensor behind = position.unsqueeze(1) - position.unsqueeze(0);  // i - j
      const at::Tensor hidden = (behind < 0).logical_or(behind > reach);
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t kv = h / group;
        const at::Tensor qh = q.narrow(0, start, length).select(1, h);
        const at::Tensor kh = k.narrow(0, start, length).select(1, kv), vh = v.narrow(0, start, length).select(1, kv);
        const at::Tensor s = at::matmul(qh, kh.t()).mul(static_cast<float>(scale)).masked_fill(hidden, -kInf);
        const at::Tensor max = std::get<0>(s.max(-1, true));
        const at::Tensor p = at::exp(s - max), rounded = p.to(at::kBFloat16).to(at::kFloat);
        const at::Tensor sum = (how.sum_rounded_p ? rounded : p).sum(-1, true);
        const at::Tensor pv = at::matmul(how.round_p ? rounded : p, vh);
        o.narrow(0, start, length).select(1, h).copy_(pv / sum);
        lse[h].narrow(0, start, length).copy_((max + at::log(sum)).squeeze(-1));
      }
    }
    return {{"o", o}, {"lse", lse}};
  }
};

TEST_F(PrefillSlidingWindow, AHandComputedBatchShowsTheBandOfFlashAttentionsWindowSizeLeft) {
  // W = 1, scale 1, D = 2, two query heads over one KV head (both ask (1, 0)). Sequence [0, 3): keys
  // (10, 0), (0, 0), (ln 3, 0) with values (100, 100), (1, 0), (0, 1); sequence [3, 4): key (2, 0), value (7, 8).
  // Query 0 sees key 0: o = v0, lse 10. Query 1 sees keys 0 and 1: scores 10 and 0. Query 2 sees keys 1 and
  // 2 (i - W = 1), never key 0, whose score of 10 would take the row: p = 1/4, 3/4, o = (1/4, 3/4), lse ln 4.
  // With W keys instead of W + 1 (the models' count) query 2 would see key 2 alone: o = (0, 1), lse ln 3.
  // Token 3 is its own sequence: o = (7, 8), lse 2.
  const double ln3 = std::log(3.0);
  const at::Tensor q = at::tensor({1.0, 0.0, 1.0, 0.0}, kF64).repeat({4}).view({4, 2, 2});
  const at::Tensor k = at::tensor({10.0, 0.0, 0.0, 0.0, ln3, 0.0, 2.0, 0.0}, kF64).view({4, 1, 2});
  const at::Tensor v = at::tensor({100.0, 100.0, 1.0, 0.0, 0.0, 1.0, 7.0, 8.0}, kF64).view({4, 1, 2});
  Scalars scalars;
  scalars.values["softmax_scale"] = 1.0;
  scalars.values["window_left"] = 1.0;
  TensorMap inputs{{"q", q}, {"k", k}, {"v", v}, {"cu_seqlens", at::tensor({0, 3, 4}, at::TensorOptions().dtype(at::kInt))}};
  const TensorMap out = code->reference(inputs, scalars);
  const at::Tensor o = out.at("o"), lse = out.at("lse");
  ASSERT_EQ(o.sizes(), (std::vector<int64_t>{4, 2, 2}));
  ASSERT_EQ(lse.sizes(), (std::vector<int64_t>{2, 4})) << "[Hq, T]: head-major";
  const auto expect = [](const at::Tensor& got, std::vector<double> want, const char* what) {
    EXPECT_TRUE(at::allclose(got.flatten(), at::tensor(want, kF64), 1e-12, 1e-12)) << what << ": " << got;
  };
  const double e10 = std::exp(10.0);
  expect(o[0], {100, 100, 100, 100}, "query 0 sees key 0 only");
  expect(lse.select(1, 0), {10, 10}, "query 0's lse is its one score");
  expect(o[1], {(100 * e10 + 1) / (e10 + 1), 100 * e10 / (e10 + 1), (100 * e10 + 1) / (e10 + 1), 100 * e10 / (e10 + 1)},
         "query 1 sees keys 0 and 1 (W = 1 key before it)");
  expect(lse.select(1, 1), {std::log(e10 + 1), std::log(e10 + 1)}, "query 1's lse");
  expect(o[2], {0.25, 0.75, 0.25, 0.75}, "query 2 sees keys 1 and 2, not key 0");
  expect(lse.select(1, 2), {std::log(4.0), std::log(4.0)}, "query 2's lse, natural log, without key 0");
  expect(o[3], {7, 8, 7, 8}, "a one-token sequence: o = v");
  expect(lse.select(1, 3), {2, 2}, "token 3's lse: its own score only");

  // W = 0: every token sees only itself.
  scalars.values["window_left"] = 0.0;
  const TensorMap alone = code->reference(inputs, scalars);
  EXPECT_TRUE(at::allclose(alone.at("o"), v.expand({4, 2, 2}), 1e-12, 1e-12)) << alone.at("o");
}

TEST_F(PrefillSlidingWindow, AWindowLargerThanEverySequenceIsPlainCausalAttention) {
  // The same inputs through attn/prefill_causal_gqa's reference (its own task, its own code): identical o
  // and lse in float64, at a window far beyond the longest sequence and at exactly L - 1.
  const auto causal = make_task_code("attn/prefill_causal_gqa");
  ASSERT_TRUE(causal);
  for (const int64_t window : {int64_t{5000}, int64_t{199}}) {
    const Workload w = workload(3, 1, 200, window, 8, 2, 128);
    const Scalars scalars = scalars_of(w, 1.0 / std::sqrt(128.0));
    const TensorMap inputs = make_inputs(task, *code, w, 7);
    TensorMap wide;
    for (const auto& [name, tensor] : inputs) wide[name] = at::isFloatingType(tensor.scalar_type()) ? tensor.to(at::kDouble) : tensor;
    TensorMap copy = wide;
    const TensorMap banded = code->reference(wide, scalars), plain = causal->reference(copy, scalars);
    EXPECT_TRUE(at::allclose(banded.at("o"), plain.at("o"), 1e-12, 1e-12)) << "W = " << window;
    EXPECT_TRUE(at::allclose(banded.at("lse"), plain.at("lse"), 1e-12, 1e-12)) << "W = " << window;
  }
}

TEST_F(PrefillSlidingWindow, TorchsFlashKernelWithTheBandMaskAgreesOnOAndLse) {
  // The library path on the cpu (torch's flash kernel, the band as a boolean mask, natural-log LSE) against
  // the float64 oracle, at both head dims: the same o and lse within the tolerance.
  for (const int64_t dim : {int64_t{128}, int64_t{64}}) {
    const Workload w = workload(3, 1, 300, 45, 8, 2, dim);
    const Scalars scalars = scalars_of(w, 1.0 / std::sqrt(static_cast<double>(dim)));
    TensorMap inputs = make_inputs(task, *code, w, 5);
    const TensorMap want = run(inputs, scalars, true);
    const auto verdict = check(task, *code, scalars, code->library(inputs, scalars), want, {});
    for (const auto& c : verdict.comparisons)
      std::cout << "D " << dim << ", torch's cpu flash kernel with the band mask: " << c.name << " nmse " << c.nmse << ", worst "
                << c.worst_excess << " of its bound\n";
    EXPECT_EQ(verdict.status, Status::passed) << "D " << dim << ": " << verdict.message;
  }
}

TEST_F(PrefillSlidingWindow, EveryWorkloadsPIsItsBandCountedQueryByQueryAndItsLengthsComeInARandomOrder) {
  for (const auto& w : task.workloads) {
    Workload small = w;
    small.axes["Hq"] = small.axes["Hkv"] = 1;
    const at::Tensor offsets = make_inputs(task, *code, small, 3).at("cu_seqlens").to(at::kLong);
    ASSERT_EQ(offsets.numel(), w.axes.at("B") + 1) << w.name;
    EXPECT_EQ(offsets[-1].item<int64_t>(), w.axes.at("T")) << w.name;
    int64_t pairs = 0;
    for (int64_t b = 0; b + 1 < offsets.numel(); ++b)
      pairs += pairs_counted(offsets[b + 1].item<int64_t>() - offsets[b].item<int64_t>(), w.axes.at("W"));
    EXPECT_EQ(pairs, w.axes.at("P")) << w.name;
    EXPECT_EQ(scalars_for(task, w).i("window_left"), w.axes.at("W")) << w.name << ": the scalar and the axis agree";
  }
  Workload mixed = *task.find_workload("mistral-7b-B4-T9400-W4095-short");
  mixed.axes["Hq"] = mixed.axes["Hkv"] = 1;
  const at::Tensor a = make_inputs(task, *code, mixed, 3).at("cu_seqlens"), b = make_inputs(task, *code, mixed, 4).at("cu_seqlens");
  EXPECT_TRUE(at::equal(a, make_inputs(task, *code, mixed, 3).at("cu_seqlens"))) << "deterministic in the seed";
  EXPECT_FALSE(at::equal(a, b)) << a << b;
  // A workload whose P disagrees with its band is refused, naming the axis.
  Workload wrong = mixed;
  wrong.axes["W"] = 999;
  try {
    make_inputs(task, *code, wrong, 3);
    ADD_FAILURE() << "a P that is not the band's was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("P = 14074700"), std::string::npos) << e.what();
  }
  // The reference refuses a scalar window that is not the axis the FLOP count used.
  const Workload smoke = *task.find_workload("gpt-oss-B3-T210-W31");
  Scalars off = scalars_of(smoke, 0.125);
  off.values["window_left"] = 32;
  TensorMap inputs = make_inputs(task, *code, smoke, 3);
  EXPECT_THROW(code->reference(inputs, off), std::exception);
}

struct Variant {
  const char* label;
  Candidate how;
  bool o_passes, lse_passes;
};

TEST_F(PrefillSlidingWindow, TheToleranceAcceptsAFlashKernelAndRejectsTheHurriedMistakes) {
  // Three sequences of 1 to 400 tokens, 8 query heads over 2 KV heads, at D 128 with W 100 and at D 64 with
  // W 31 (the smoke workloads' narrow band), the published normal inputs and the hidden workloads'
  // heavy-tailed keys.
  for (const int64_t dim : {int64_t{128}, int64_t{64}}) {
    for (const bool heavy_tail : {false, true}) {
      const int64_t window = dim == 128 ? 100 : 31;
      Workload w = workload(3, 1, 400, window, 8, 2, dim);
      if (heavy_tail) w.inits["k"] = InputInit{.dist = "student_t", .std = 1.0, .df = 3.0};
      const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
      const Scalars scalars = scalars_of(w, scale);
      const TensorMap inputs = make_inputs(task, *code, w, heavy_tail ? 17 : 13);
      const TensorMap want = run(inputs, scalars, true);
      std::vector<Variant> variants = {
          {"FlashAttention (bf16 p)", {}, true, true},
          {"fp32 p", {.round_p = false}, true, true},
          {"the sum over the bf16 p", {.sum_rounded_p = true}, true, false},
          {"the window off by one (W keys)", {.window_shift = -1}, false, false},
          {"the window ignored (causal)", {.window_ignored = true}, false, false},
      };
      if (dim == 64) variants.push_back({"D-128 strides on D-64 tensors", {.strides_of_128 = true}, false, false});
      const std::string label = "D " + std::to_string(dim) + (heavy_tail ? ", heavy-tailed k, " : ", normal, ");
      for (const auto& variant : variants) {
        expect_o_and_lse(label + variant.label,
                         check(task, *code, scalars, candidate(inputs, scale, window, variant.how), want, {}),
                         variant.o_passes, variant.lse_passes);
      }
      // The eager baseline (bf16 scores, scaled in bf16) is timed, not held to the tolerance.
      const auto eager = check(task, *code, scalars, run(inputs, scalars, false), want, {});
      print_verdict(label + "eager (bf16 scores)", eager);
      EXPECT_EQ(eager.status, Status::incorrect_numerics) << label;
    }
  }
}

}  // namespace
}  // namespace d2k
