// attn/qk_norm_rope against its originals: the reference normalizes every head of q and k with its own
// weight, rotates the neox halves by the row at the token's position and leaves v alone; the task's
// tolerance accepts the unfused CUDA path (the norm's two roundings, the rotation's one), the fused kernels'
// single rounding and the eager's five, and rejects a norm over the whole projection (OLMo-2's qk-norm),
// the weight applied after the rotation, an fp8 normalized value and any change to v.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>

#include "core/task_loader.hpp"
#include "reference/check.hpp"
#include "reference/inputs.hpp"

namespace d2k {
namespace {

const std::filesystem::path kTasks = std::filesystem::path(D2K_ROOT_DIR) / "tasks";

struct QkNormRope : ::testing::Test {
  Task task = load_task(kTasks, std::string("attn/qk_norm_rope"));
  std::unique_ptr<TaskCode> code = make_task_code("attn/qk_norm_rope");

  // The reference's qkv for these inputs (copies; the inputs stay as they are).
  at::Tensor reference(const TensorMap& inputs, const Scalars& scalars) const {
    TensorMap copy;
    for (const auto& [name, tensor] : inputs) copy[name] = tensor.clone();
    code->reference(copy, scalars);
    return copy.at("qkv");
  }
  at::Tensor oracle(const TensorMap& inputs, const Scalars& scalars) const {
    TensorMap wide;
    for (const auto& [name, tensor] : inputs)
      wide[name] = at::isFloatingType(tensor.scalar_type()) ? tensor.to(at::kDouble) : tensor.clone();
    return reference(wide, scalars);
  }
};

Scalars scalars_of(double eps, int64_t heads_q, int64_t heads_kv) {
  Scalars scalars;
  scalars.values = {{"eps", eps}, {"num_heads_q", static_cast<double>(heads_q)}, {"num_heads_kv", static_cast<double>(heads_kv)}};
  return scalars;
}

TEST_F(QkNormRope, TheReferenceNormalizesEachHeadThenRotatesItByTheRowAtItsPosition) {
  // One q head, one k head and one v head of 4 values (pairs (0, 2) and (1, 3)); eps 0 keeps every step
  // exact. A 3-row table: the identity, a quarter turn, cos 0.5 and sin 0.75.
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor cache = at::tensor({1.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f, 1.0f, 0.5f, 0.5f, 0.75f, 0.75f}, f32).view({3, 4});
  // q: var (4 + 4 + 4 + 4) / 4 = 4, so x / 2 = (1, -1, 1, -1), times q_weight (1, 0.5, 2, 1.5) = (1, -0.5, 2, -1.5).
  // k (0.5, -0.5, 0.5, 0.5): var 0.25, so x * 2 = (1, -1, 1, 1), times k_weight (2, 2, 0.25, 0.25) = (2, -2,
  // 0.25, 0.25). v (7, -3, 0.1, 0.001) stays as it is.
  const at::Tensor row = at::tensor({2.0f, -2.0f, 2.0f, -2.0f, 0.5f, -0.5f, 0.5f, 0.5f, 7.0f, -3.0f, 0.1f, 1e-3f}, f32);
  TensorMap inputs{{"qkv", row.repeat({2, 1}).to(at::kBFloat16)},
                   {"q_weight", at::tensor({1.0f, 0.5f, 2.0f, 1.5f}, f32).to(at::kBFloat16)},
                   {"k_weight", at::tensor({2.0f, 2.0f, 0.25f, 0.25f}, f32).to(at::kBFloat16)},
                   {"positions", at::tensor({int64_t{2}, int64_t{1}}, at::TensorOptions().dtype(at::kLong))},
                   {"cos_sin_cache", cache.to(at::kBFloat16)}};
  const at::Tensor out = reference(inputs, scalars_of(0.0, 1, 1)).to(at::kFloat);
  // Token 0 at position 2: q (1, -0.5, 2, -1.5) -> (1 * 0.5 - 2 * 0.75, -0.5 * 0.5 + 1.5 * 0.75, 2 * 0.5 + 0.75,
  // -1.5 * 0.5 - 0.5 * 0.75); k (2, -2, 0.25, 0.25) -> (1 - 0.1875, -1 - 0.1875, 0.125 + 1.5, 0.125 - 1.5).
  EXPECT_TRUE(at::equal(out[0].narrow(0, 0, 4), at::tensor({-1.0f, 0.875f, 1.75f, -1.125f}, f32))) << out[0];
  EXPECT_TRUE(at::equal(out[0].narrow(0, 4, 4), at::tensor({0.8125f, -1.1875f, 1.625f, -1.375f}, f32))) << out[0];
  // Token 1 at position 1, a quarter turn: (a, b, c, d) -> (-c, -d, a, b).
  EXPECT_TRUE(at::equal(out[1].narrow(0, 0, 4), at::tensor({-2.0f, 1.5f, 1.0f, -0.5f}, f32))) << out[1];
  EXPECT_TRUE(at::equal(out[1].narrow(0, 4, 4), at::tensor({-0.25f, -0.25f, 2.0f, -2.0f}, f32))) << out[1];
  // v is untouched, bit for bit.
  EXPECT_TRUE(at::equal(out.narrow(1, 8, 4), inputs.at("qkv").narrow(1, 8, 4).to(at::kFloat)));
}

TEST_F(QkNormRope, TheReferenceLeavesVBitForBitAndComparesItExactly) {
  const Workload& w = *task.find_workload("qwen3-30b-T37");
  const TensorMap inputs = make_inputs(task, *code, w, 5);
  const Scalars scalars = scalars_for(task, w);
  const at::Tensor out = reference(inputs, scalars);
  const auto v_in = code->comparable({{"qkv", inputs.at("qkv")}}, scalars).at("v");
  const auto parts = code->comparable({{"qkv", out}}, scalars);
  EXPECT_TRUE(at::equal(parts.at("v"), v_in));
  EXPECT_EQ(parts.at("q").size(1), 32 * 128);
  EXPECT_EQ(parts.at("k").size(1), 4 * 128);
  EXPECT_EQ(parts.at("v").size(1), 4 * 128);
  EXPECT_EQ(task.tolerance_for("v")->metric, Tolerance::Metric::exact);
}

// The two halves of x [T, H, D] rotated in fp32 by rows [T, D] (cos | sin).
at::Tensor rope_fp32(const at::Tensor& x, const at::Tensor& rows) {
  const int64_t half = x.size(-1) / 2;
  const auto c = rows.narrow(-1, 0, half).to(at::kFloat).unsqueeze(1), s = rows.narrow(-1, half, half).to(at::kFloat).unsqueeze(1);
  const auto a = x.narrow(-1, 0, half), b = x.narrow(-1, half, half);
  return at::cat({a * c - b * s, b * c + a * s}, -1);
}

at::Tensor bf16(const at::Tensor& x) { return x.to(at::kBFloat16).to(at::kFloat); }

enum class Way { unfused, fused, whole_projection, weight_after_rotation, fp8_normalized, bf16_variance };

// One tensor's heads (q or k) normalized and rotated some way, in fp32 before the final rounding.
at::Tensor norm_rope(const at::Tensor& heads, const at::Tensor& weight, const at::Tensor& rows, double eps, Way way) {
  const auto x = heads.to(at::kFloat);
  const auto w = weight.to(at::kFloat);
  at::Tensor variance = x.pow(2).mean(-1, true);
  if (way == Way::whole_projection) variance = x.pow(2).mean({-2, -1}, true);
  if (way == Way::bf16_variance) {
    // The sum of squares accumulated in bf16, a rounding after every add.
    at::Tensor sum = at::zeros_like(variance);
    for (int64_t j = 0; j < x.size(-1); ++j) sum = bf16(sum + bf16(x.narrow(-1, j, 1).pow(2)));
    variance = sum / static_cast<double>(x.size(-1));
  }
  const auto inv = at::rsqrt(variance + eps);
  switch (way) {
    case Way::fused: return rope_fp32(x * inv * w, rows);
    case Way::weight_after_rotation: return bf16(rope_fp32(bf16(x * inv), rows)) * w;
    case Way::fp8_normalized: return rope_fp32((x * inv * w).to(at::kFloat8_e4m3fn).to(at::kFloat), rows);
    default: return rope_fp32(bf16(bf16(x * inv) * w), rows);
  }
}

TEST_F(QkNormRope, TheToleranceAcceptsTheUnfusedFusedAndEagerRoundingsAndRejectsWrongNorms) {
  for (const bool heavy_tail : {false, true}) {
    Workload w = *task.find_workload("qwen3-30b-T37");
    w.axes["T"] = 512;
    w.axes["S"] = 8;
    if (heavy_tail) w.inits["qkv"] = InputInit{.dist = "student_t", .std = 1.0, .df = 3.0};
    const Scalars scalars = scalars_for(task, w);
    const double eps = scalars.f("eps");
    const TensorMap inputs = make_inputs(task, *code, w, heavy_tail ? 23 : 19);
    const at::Tensor& qkv = inputs.at("qkv");
    const int64_t tokens = qkv.size(0);
    const auto rows = inputs.at("cos_sin_cache").index_select(0, inputs.at("positions"));
    const auto q = qkv.narrow(1, 0, 32 * 128).view({tokens, 32, 128});
    const auto k = qkv.narrow(1, 32 * 128, 4 * 128).view({tokens, 4, 128});
    const auto v = qkv.narrow(1, 36 * 128, 4 * 128);
    const auto packed = [&](Way way) {
      return at::cat({norm_rope(q, inputs.at("q_weight"), rows, eps, way).view({tokens, -1}),
                      norm_rope(k, inputs.at("k_weight"), rows, eps, way).view({tokens, -1}), v.to(at::kFloat)},
                     1)
          .to(at::kBFloat16);
    };
    // The definition's output with one element of v moved to the next bf16 value (its bits plus one).
    at::Tensor v_touched = packed(Way::unfused).contiguous();
    v_touched.view(at::kShort)[3][36 * 128 + 77].add_(1);
    // name -> (qkv, must pass); nullopt: printed only.
    const std::map<std::string, std::pair<at::Tensor, std::optional<bool>>> variants = {
        {"unfused CUDA ops (the definition)", {packed(Way::unfused), true}},
        {"one rounding (fused kernels)", {packed(Way::fused), true}},
        {"eager (two + three roundings)", {reference(inputs, scalars), true}},
        {"norm over the whole projection", {packed(Way::whole_projection), false}},
        {"weight after the rotation", {packed(Way::weight_after_rotation), false}},
        {"fp8 e4m3 normalized value", {packed(Way::fp8_normalized), false}},
        {"variance accumulated in bf16", {packed(Way::bf16_variance), std::nullopt}},
        {"one element of v one ulp up", {v_touched, false}},
    };
    const TensorMap want{{"qkv", oracle(inputs, scalars)}};
    for (const auto& [name, variant] : variants) {
      const auto verdict = check(task, *code, scalars, {{"qkv", variant.first}}, want, {});
      ASSERT_EQ(verdict.comparisons.size(), 3u);
      std::cout << (heavy_tail ? "heavy tail, " : "normal, ") << name << ":";
      for (const auto& c : verdict.comparisons)
        std::cout << " " << c.name << " nmse " << c.nmse << " worst excess " << c.worst_excess << " mismatches " << c.mismatches << ";";
      std::cout << "\n";
      if (variant.second) EXPECT_EQ(verdict.status == Status::passed, *variant.second) << name << ": " << verdict.message;
    }
    const auto v_verdict = check(task, *code, scalars, {{"qkv", v_touched}}, want, {});
    EXPECT_EQ(v_verdict.status, Status::incorrect_numerics);
    EXPECT_NE(v_verdict.message.find("'v': 1 of 262144 elements"), std::string::npos) << v_verdict.message;
  }
}

}  // namespace
}  // namespace d2k
