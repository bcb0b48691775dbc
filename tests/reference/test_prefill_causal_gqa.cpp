// attn/prefill_causal_gqa against its definition and its originals: a hand-computed batch (a query sees
// only itself and the keys before it in its own sequence, query head h reads KV head h / G, the LSE in
// natural log of the scaled scores, a one-token sequence gives o = v); torch's own flash kernel agrees on o
// and on the LSE's base and layout; make_inputs gives the workload's lengths in a random order. The
// tolerance accepts what a FlashAttention kernel computes (fp32 scores and softmax, bf16 probabilities) and
// rejects a mask missing on the last partial tile, a base-2 LSE, the scale applied twice or not at all, and
// the KV head taken as h % Hkv.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <numbers>

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
  bool round_p = true;              // p rounded to bf16 before p v (FlashAttention); the sum of the fp32 p
  bool sum_rounded_p = false;       // the sum taken over the bf16 p instead (the lse then carries its rounding)
  bool unmasked_last_tile = false;  // the causal mask skipped on a sequence's last partial 64-key tile
  bool lse_base2 = false;           // lse as log2(sum of exp)
  double scale_power = 1.0;         // 2: the scale applied twice; 0: not at all
  bool kv_head_modulo = false;      // query head h reads KV head h % Hkv instead of h / G
};

struct PrefillCausalGqa : ::testing::Test {
  Task task = load_task(kTasks, std::string("attn/prefill_causal_gqa"));
  std::unique_ptr<TaskCode> code = make_task_code("attn/prefill_causal_gqa");

  static Scalars scalars_of(const Workload& w, double scale) {
    Scalars scalars;
    scalars.axes = w.axes;
    scalars.values["softmax_scale"] = scale;
    return scalars;
  }
  // A workload with these lengths (B, Lmin, Lmax) and heads; T and P follow.
  Workload workload(int64_t count, int64_t shortest, int64_t longest, int64_t heads, int64_t kv_heads) const {
    Workload w = *task.find_workload("llama3-8b-B3-T120");
    int64_t tokens = 0, pairs = 0;
    for (int64_t b = 0; b < count; ++b) {
      const int64_t length = count == 1 ? shortest : shortest + b * (longest - shortest) / (count - 1);
      tokens += length, pairs += length * (length + 1) / 2;
    }
    w.axes = {{"T", tokens}, {"B", count}, {"Lmin", shortest}, {"Lmax", longest}, {"P", pairs},
              {"Hq", heads},  {"Hkv", kv_heads}, {"D", 128}};
    return w;
  }
  // The reference on these inputs, natively or in float64 (the oracle).
  TensorMap run(const TensorMap& inputs, const Scalars& scalars, bool wide) const {
    TensorMap copy;
    for (const auto& [name, tensor] : inputs)
      copy[name] = wide && at::isFloatingType(tensor.scalar_type()) ? tensor.to(at::kDouble) : tensor;
    return code->reference(copy, scalars);
  }

  // A kernel's arithmetic, written out: per sequence and head, fp32 scores of the bf16 inputs, the row
  // maximum, p = exp(s - max) in fp32 (rounded to bf16 for p v where FlashAttention rounds it), the sum of
  // the fp32 p, o = (p v) / sum rounded once, lse = max + log(sum).
  static TensorMap candidate(const TensorMap& inputs, double scale, const Candidate& how) {
    const at::Tensor q = inputs.at("q").to(at::kFloat), k = inputs.at("k").to(at::kFloat), v = inputs.at("v").to(at::kFloat);
    const at::Tensor offsets = inputs.at("cu_seqlens").to(at::kLong);
    const int64_t tokens = q.size(0), heads = q.size(1), kv_heads = k.size(1), group = heads / kv_heads;
    at::Tensor o = at::empty({tokens, heads, q.size(2)}, at::TensorOptions().dtype(at::kBFloat16));
    at::Tensor lse = at::empty({heads, tokens}, at::TensorOptions().dtype(at::kFloat));
    const float factor = static_cast<float>(std::pow(scale, how.scale_power));
    for (int64_t b = 0; b + 1 < offsets.numel(); ++b) {
      const int64_t start = offsets[b].item<int64_t>(), length = offsets[b + 1].item<int64_t>() - start;
      // Key j is hidden from query i when j > i, except (the mistake) inside the last partial tile.
      at::Tensor hidden = at::ones({length, length}, at::TensorOptions().dtype(at::kBool)).triu(1);
      const int64_t last_tile = length / 64 * 64;
      if (how.unmasked_last_tile && length % 64 != 0) hidden.narrow(1, last_tile, length - last_tile).fill_(false);
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t kv = how.kv_head_modulo ? h % kv_heads : h / group;
        const at::Tensor qh = q.narrow(0, start, length).select(1, h);
        const at::Tensor kh = k.narrow(0, start, length).select(1, kv), vh = v.narrow(0, start, length).select(1, kv);
        const at::Tensor s = at::matmul(qh, kh.t()).mul(factor).masked_fill(hidden, -kInf);
        const at::Tensor max = std::get<0>(s.max(-1, true));
        const at::Tensor p = at::exp(s - max), rounded = p.to(at::kBFloat16).to(at::kFloat);
        const at::Tensor sum = (how.sum_rounded_p ? rounded : p).sum(-1, true);
        const at::Tensor pv = at::matmul(how.round_p ? rounded : p, vh);
        o.narrow(0, start, length).select(1, h).copy_(pv / sum);
        const at::Tensor row_lse = (max + at::log(sum)).squeeze(-1);
        lse[h].narrow(0, start, length).copy_(how.lse_base2 ? row_lse / std::numbers::ln2 : row_lse);
      }
    }
    return {{"o", o}, {"lse", lse}};
  }
};

at::Tensor bf16(std::vector<float> values, std::vector<int64_t> shape) {
  return at::tensor(values, at::TensorOptions().dtype(at::kFloat)).view(shape).to(at::kBFloat16);
}

TEST_F(PrefillCausalGqa, AHandComputedBatchShowsTheMaskTheGroupsAndTheNaturalLogLse) {
  // Two sequences, [0, 2) and [2, 3), 4 query heads over 2 KV heads, D = 2, scale 0.5. KV head 0 has keys
  // (0, 0) and (2 ln 3, 0) with values (1, 0) and (0, 1); KV head 1 keys (4, 0), (0, 0) and values (5, 0),
  // (0, 5). Every query head asks (1, 0), except head 3 of token 1, which asks (0, 1).
  // Token 0 (query 0 of its sequence) sees key 0 only: o = v0, lse = its one score.
  // Token 1, heads 0 and 1 (KV head 0): scores 0 and ln 3, p = 1/4, 3/4, o = (1/4, 3/4), lse = ln 4.
  // Token 1, heads 2 and 3 (KV head 1): head 2 scores 2 and 0; head 3 scores 0 and 0: o = (2.5, 2.5), lse ln 2.
  // Token 2 (its own sequence, length 1) sees itself only, never tokens 0 and 1.
  const double ln3 = std::log(3.0);
  const at::Tensor q = at::tensor({1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0,    // token 0
                                   1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0,    // token 1
                                   1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0},   // token 2
                                  kF64).view({3, 4, 2});
  const at::Tensor k = at::tensor({0.0, 0.0, 4.0, 0.0, 2 * ln3, 0.0, 0.0, 0.0, 6.0, 0.0, -2.0, 0.0}, kF64).view({3, 2, 2});
  const at::Tensor v = at::tensor({1.0, 0.0, 5.0, 0.0, 0.0, 1.0, 0.0, 5.0, 7.0, 8.0, 9.0, 10.0}, kF64).view({3, 2, 2});
  Scalars scalars;
  scalars.values["softmax_scale"] = 0.5;
  TensorMap inputs{{"q", q}, {"k", k}, {"v", v}, {"cu_seqlens", at::tensor({0, 2, 3}, at::TensorOptions().dtype(at::kInt))}};
  const TensorMap out = code->reference(inputs, scalars);
  const at::Tensor o = out.at("o"), lse = out.at("lse");
  ASSERT_EQ(o.sizes(), (std::vector<int64_t>{3, 4, 2}));
  ASSERT_EQ(lse.sizes(), (std::vector<int64_t>{4, 3})) << "[Hq, T]: head-major";
  const auto expect = [](const at::Tensor& got, std::vector<double> want, const char* what) {
    EXPECT_TRUE(at::allclose(got.flatten(), at::tensor(want, kF64), 1e-12, 1e-12)) << what << ": " << got;
  };
  expect(o[0], {1, 0, 1, 0, 5, 0, 5, 0}, "token 0 sees only key 0 (heads 2, 3 read KV head 1, h / G)");
  expect(lse.select(1, 0), {0, 0, 2, 2}, "token 0's lse is its one score, 0.5 * q.k");
  expect(o[1], {0.25, 0.75, 0.25, 0.75, 5 / (1 + std::exp(-2.0)), 5 / (1 + std::exp(2.0)), 2.5, 2.5}, "token 1");
  expect(lse.select(1, 1), {std::log(4.0), std::log(4.0), std::log(std::exp(2.0) + 1), std::log(2.0)}, "token 1's lse, natural log");
  expect(o[2], {7, 8, 7, 8, 9, 10, 9, 10}, "a one-token sequence: o = v");
  expect(lse.select(1, 2), {3, 3, -1, -1}, "token 2's lse: its own score only, not tokens 0 and 1's");
}

TEST_F(PrefillCausalGqa, TorchsFlashKernelAgreesOnOAndOnTheLsesBaseAndLayout) {
  // The library path on the cpu (torch's flash kernel, natural-log LSE [1, H, L] per sequence) against the
  // float64 oracle: the same o and lse within the tolerance. A base-2 or [T, Hq] LSE would be far off.
  const Workload w = workload(3, 1, 300, 8, 2);
  const Scalars scalars = scalars_of(w, 1.0 / std::sqrt(128.0));
  TensorMap inputs = make_inputs(task, *code, w, 5);
  const TensorMap want = run(inputs, scalars, true);
  const TensorMap library = code->library(inputs, scalars);
  const auto verdict = check(task, *code, scalars, library, want, {});
  for (const auto& c : verdict.comparisons)
    std::cout << "torch's cpu flash kernel: " << c.name << " nmse " << c.nmse << ", worst element " << c.worst_excess << " of its bound\n";
  EXPECT_EQ(verdict.status, Status::passed) << verdict.message;
}

TEST_F(PrefillCausalGqa, MakeInputsGivesTheWorkloadsLengthsInARandomOrder) {
  for (const auto& w : task.workloads) {
    const std::vector<int64_t> axes = {w.axes.at("B"), w.axes.at("Lmin"), w.axes.at("Lmax")};
    // The lengths only (one head of each kind: the draw of q, k, v is not what this checks).
    Workload small = w;
    small.axes["Hq"] = small.axes["Hkv"] = 1;
    const at::Tensor offsets = make_inputs(task, *code, small, 3).at("cu_seqlens").to(at::kLong);
    ASSERT_EQ(offsets.numel(), axes[0] + 1) << w.name;
    EXPECT_EQ(offsets[0].item<int64_t>(), 0) << w.name;
    EXPECT_EQ(offsets[-1].item<int64_t>(), w.axes.at("T")) << w.name;
    const at::Tensor lengths = offsets.diff();
    EXPECT_EQ(lengths.min().item<int64_t>(), axes[1]) << w.name;
    EXPECT_EQ(lengths.max().item<int64_t>(), axes[2]) << w.name;
    EXPECT_EQ((lengths * (lengths + 1) / 2).sum().item<int64_t>(), w.axes.at("P")) << w.name;
  }
  // The order is random: the mixed batch is neither sorted nor the same for two seeds.
  Workload mixed = *task.find_workload("llama3-8b-B8-T18449-mixed");
  mixed.axes["Hq"] = mixed.axes["Hkv"] = 1;
  const at::Tensor a = make_inputs(task, *code, mixed, 3).at("cu_seqlens"), b = make_inputs(task, *code, mixed, 4).at("cu_seqlens");
  EXPECT_TRUE(at::equal(a, make_inputs(task, *code, mixed, 3).at("cu_seqlens"))) << "deterministic in the seed";
  EXPECT_FALSE(at::equal(a, b)) << a << b;
  // A workload whose T or P disagrees with its lengths is refused, naming the axis.
  Workload wrong = mixed;
  wrong.axes["P"] += 1;
  try {
    make_inputs(task, *code, wrong, 3);
    ADD_FAILURE() << "a wrong P was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("P = 26771495"), std::string::npos) << e.what();
  }
}

struct Variant {
  const char* label;
  Candidate how;
  bool o_passes, lse_passes;
};

TEST_F(PrefillCausalGqa, TheToleranceAcceptsAFlashKernelAndRejectsTheHurriedMistakes) {
  // Four sequences of 1 to 700 tokens (none a multiple of 64 but the first), 8 query heads over 2 KV heads,
  // the published normal inputs and the hidden workload's heavy-tailed keys.
  for (const bool heavy_tail : {false, true}) {
    Workload w = workload(4, 1, 700, 8, 2);
    if (heavy_tail) w.inits["k"] = InputInit{.dist = "student_t", .std = 1.0, .df = 3.0};
    const double scale = 1.0 / std::sqrt(128.0);
    const Scalars scalars = scalars_of(w, scale);
    const TensorMap inputs = make_inputs(task, *code, w, heavy_tail ? 17 : 13);
    const TensorMap want = run(inputs, scalars, true);
    const std::vector<Variant> variants = {
        {"FlashAttention (bf16 p)", {}, true, true},
        {"fp32 p", {.round_p = false}, true, true},
        {"the sum over the bf16 p", {.sum_rounded_p = true}, true, false},
        {"no causal mask on the last partial tile", {.unmasked_last_tile = true}, false, false},
        {"lse in base 2", {.lse_base2 = true}, true, false},
        {"the scale applied twice", {.scale_power = 2.0}, false, false},
        {"the scale not applied", {.scale_power = 0.0}, false, false},
        {"KV head h % Hkv", {.kv_head_modulo = true}, false, false},
    };
    for (const auto& variant : variants) {
      expect_o_and_lse(std::string(heavy_tail ? "heavy-tailed k, " : "normal, ") + variant.label,
                       check(task, *code, scalars, candidate(inputs, scale, variant.how), want, {}), variant.o_passes,
                       variant.lse_passes);
    }
    // The eager baseline (bf16 scores, scaled in bf16) is timed, not held to the tolerance: its scores are
    // the lower precision the tolerance rejects (both outputs' nmse between the fp32 kernels and the bounds).
    const auto eager = check(task, *code, scalars, run(inputs, scalars, false), want, {});
    print_verdict(std::string(heavy_tail ? "heavy-tailed k, " : "normal, ") + "eager (bf16 scores)", eager);
    EXPECT_EQ(eager.status, Status::incorrect_numerics);
  }
}

}  // namespace
}  // namespace d2k
