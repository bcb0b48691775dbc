// pos/rope_neox against its originals: the reference rotates the neox halves of every head by its token's
// table row (looked up by position, not by index) with vLLM's eager bf16 arithmetic; make_inputs gives a
// batch of sequences at distinct positions and vLLM's table; the task's tolerance accepts the CUDA op's one
// rounding and the eager's three, and rejects GPT-J pairing, positions ignored, a position off by one and
// an fp8 table.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <numbers>
#include <set>

#include "core/task_loader.hpp"
#include "reference/check.hpp"
#include "reference/inputs.hpp"

namespace d2k {
namespace {

const std::filesystem::path kTasks = std::filesystem::path(D2K_ROOT_DIR) / "tasks";

float round_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

struct RopeNeox : ::testing::Test {
  Task task = load_task(kTasks, std::string("pos/rope_neox"));
  std::unique_ptr<TaskCode> code = make_task_code("pos/rope_neox");
  Scalars scalars;

  // The reference's q and k for these inputs (copies; the inputs stay as they are).
  TensorMap reference(const TensorMap& inputs) const {
    TensorMap copy;
    for (const auto& [name, tensor] : inputs) copy[name] = tensor.clone();
    code->reference(copy, scalars);
    return {{"q", copy.at("q")}, {"k", copy.at("k")}};
  }
  TensorMap oracle(const TensorMap& inputs) const {
    TensorMap wide;
    for (const auto& [name, tensor] : inputs)
      wide[name] = at::isFloatingType(tensor.scalar_type()) ? tensor.to(at::kDouble) : tensor.clone();
    return reference(wide);
  }
  Workload workload(const std::string& name, std::map<std::string, int64_t> axes) const {
    Workload w = *task.find_workload(name);
    for (const auto& [axis, value] : axes) w.axes[axis] = value;
    return w;
  }
};

TEST_F(RopeNeox, TheReferenceRotatesTheNeoxHalvesByTheRowAtTheTokensPosition) {
  // A hand-made table of 3 rows for a head of 4 (pairs (0, 2) and (1, 3)): row 0 the identity, row 1 a
  // quarter turn, row 2 cos 0.5 and sin 0.75 (every product and sum exact in bf16).
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor cache = at::tensor({1.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f, 1.0f, 0.5f, 0.5f, 0.75f, 0.75f}, f32).view({3, 4});
  // Three tokens in the batch at positions 2, 0, 1: a row looked up by the token's index would differ.
  const at::Tensor positions = at::tensor({int64_t{2}, int64_t{0}, int64_t{1}}, at::TensorOptions().dtype(at::kLong));
  const at::Tensor x = at::tensor({2.0f, -1.0f, 4.0f, 0.5f}, f32).view({1, 1, 4}).repeat({3, 1, 1});
  TensorMap inputs{{"positions", positions},
                   {"q", x.to(at::kBFloat16)},
                   {"k", (-x).to(at::kBFloat16)},
                   {"cos_sin_cache", cache.to(at::kBFloat16)}};
  const auto out = reference(inputs);
  const at::Tensor q = out.at("q").to(at::kFloat);
  // Position 2: (2, 4) -> (2 * 0.5 - 4 * 0.75, 4 * 0.5 + 2 * 0.75) = (-2, 3.5); (-1, 0.5) -> (-0.875, -0.5).
  EXPECT_TRUE(at::equal(q[0][0], at::tensor({-2.0f, -0.875f, 3.5f, -0.5f}, f32))) << q[0][0];
  // Position 0: the identity.
  EXPECT_TRUE(at::equal(q[1][0], at::tensor({2.0f, -1.0f, 4.0f, 0.5f}, f32))) << q[1][0];
  // Position 1: a quarter turn, (x, y) -> (-y, x) on the pairs (0, 2) and (1, 3), not on neighbours.
  EXPECT_TRUE(at::equal(q[2][0], at::tensor({-4.0f, -0.5f, 2.0f, -1.0f}, f32))) << q[2][0];
  EXPECT_TRUE(at::equal(out.at("k").to(at::kFloat), -q)) << "k is rotated by the same rows";
}

TEST_F(RopeNeox, TheReferenceRoundsEachProductAndTheSumAsVllmsEagerCodeDoes) {
  // Values whose products are not bf16 numbers: the eager code rounds x c and y s, then the difference.
  const std::vector<float> xs = {1.0078125f, -3.015625f, 0.33203125f, 7.25f}, ys = {0.99609375f, 2.984375f, -1.5078125f, 0.1015625f};
  const float c = round_bf16(std::cos(1.0f)), s = round_bf16(std::sin(1.0f));
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  at::Tensor x = at::empty({1, 1, 8}, f32);
  for (int i = 0; i < 4; ++i) x[0][0][i] = xs[i], x[0][0][4 + i] = ys[i];
  at::Tensor cache = at::empty({1, 8}, f32);
  cache.narrow(1, 0, 4).fill_(c);
  cache.narrow(1, 4, 4).fill_(s);
  TensorMap inputs{{"positions", at::zeros({1}, at::TensorOptions().dtype(at::kLong))},
                   {"q", x.to(at::kBFloat16)},
                   {"k", x.to(at::kBFloat16)},
                   {"cos_sin_cache", cache.to(at::kBFloat16)}};
  const at::Tensor q = reference(inputs).at("q").to(at::kFloat);
  int differs_from_one_rounding = 0;
  for (int i = 0; i < 4; ++i) {
    const float first = round_bf16(round_bf16(xs[i] * c) - round_bf16(ys[i] * s));
    const float second = round_bf16(round_bf16(ys[i] * c) + round_bf16(xs[i] * s));
    EXPECT_EQ(q[0][0][i].item<float>(), first) << i;
    EXPECT_EQ(q[0][0][4 + i].item<float>(), second) << i;
    differs_from_one_rounding += first != round_bf16(xs[i] * c - ys[i] * s);
    differs_from_one_rounding += second != round_bf16(ys[i] * c + xs[i] * s);
  }
  EXPECT_GT(differs_from_one_rounding, 0) << "the values should tell three roundings from one";
}

TEST_F(RopeNeox, TheTableIsVllmsForLlama3AndLlama31) {
  for (const int64_t positions : {int64_t{8192}, int64_t{131072}}) {
    const Workload w = workload("llama3-8b-T37", {{"M", positions}});
    const at::Tensor cache = make_inputs(task, *code, w, 1).at("cos_sin_cache").to(at::kDouble);
    ASSERT_EQ(cache.sizes(), (std::vector<int64_t>{positions, 128}));
    EXPECT_TRUE(at::equal(cache[0].narrow(0, 0, 64), at::ones({64}, at::kDouble))) << "cos 0 = 1";
    EXPECT_TRUE(at::equal(cache[0].narrow(0, 64, 64), at::zeros({64}, at::kDouble))) << "sin 0 = 0";
    // Frequency i = 1 / 500000^(i/64); Llama-3.1 divides the low frequencies (wavelength above 8192) by 8
    // and blends the band between wavelengths 2048 and 8192.
    for (const int64_t i : {0, 10, 40, 63}) {
      double f = std::pow(500000.0, -static_cast<double>(i) / 64.0);
      const double wavelength = 2.0 * std::numbers::pi / f;
      if (positions == 131072 && wavelength > 8192.0) f /= 8.0;
      if (positions == 131072 && wavelength >= 2048.0 && wavelength <= 8192.0) {
        const double smooth = (8192.0 / wavelength - 1.0) / 3.0;
        f = (1.0 - smooth) * f / 8.0 + smooth * f;
      }
      for (const int64_t p : {int64_t{1}, int64_t{777}, positions - 1}) {
        // The fp32 product p f is off by up to half an fp32 ulp of it, then cos and sin are rounded to bf16.
        const double slack = 0.5 * std::ldexp(1.0, -24) * 2.0 * p * f + std::ldexp(1.0, -8);
        EXPECT_NEAR(cache[p][i].item<double>(), std::cos(p * f), slack) << positions << " " << p << " " << i;
        EXPECT_NEAR(cache[p][64 + i].item<double>(), std::sin(p * f), slack) << positions << " " << p << " " << i;
      }
    }
  }
}

TEST_F(RopeNeox, PositionsAreRunsOfSequencesAtDistinctOffsets) {
  for (const auto& [tokens, sequences] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {37, 5}, {4096, 16}, {2048, 2048}}) {
    const int64_t positions = 8192;
    const Workload w = workload("llama3-8b-T37", {{"T", tokens}, {"S", sequences}, {"M", positions}});
    const at::Tensor p = make_inputs(task, *code, w, 3).at("positions");
    ASSERT_EQ(p.scalar_type(), at::kLong);
    ASSERT_EQ(p.numel(), tokens);
    EXPECT_TRUE(at::equal(p, make_inputs(task, *code, w, 3).at("positions"))) << "deterministic in the seed";
    std::set<int64_t> distinct;
    int64_t breaks = 0;
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t at_t = p[t].item<int64_t>();
      EXPECT_GE(at_t, 0);
      EXPECT_LT(at_t, positions);
      distinct.insert(at_t);
      if (t > 0 && at_t != p[t - 1].item<int64_t>() + 1) ++breaks;
    }
    EXPECT_EQ(static_cast<int64_t>(distinct.size()), tokens) << "distinct positions (min_bytes counts a row each)";
    // A new run starts at every break (two runs can happen to abut in both orders, so at most S - 1).
    EXPECT_LE(breaks, sequences - 1);
    if (sequences > 2) EXPECT_GE(breaks, sequences / 2) << tokens << " tokens";
    if (tokens > 1) EXPECT_FALSE(at::equal(p, at::arange(tokens, at::TensorOptions().dtype(at::kLong)))) << "not 0..T-1";
    if (tokens == 1) EXPECT_FALSE(at::equal(p, make_inputs(task, *code, w, 4).at("positions"))) << "another seed";
  }
}

// Rotations computed otherwise than the reference: name -> (q, must pass).
struct Variant {
  at::Tensor q;
  bool passes;
};

at::Tensor rotate_fp32(const at::Tensor& x, const at::Tensor& rows, bool interleaved) {
  const auto xf = x.to(at::kFloat);
  const auto c = rows.narrow(-1, 0, 64).to(at::kFloat).unsqueeze(1), s = rows.narrow(-1, 64, 64).to(at::kFloat).unsqueeze(1);
  if (interleaved) {
    // GPT-J: pairs of neighbours (2i, 2i + 1), frequency i.
    const auto a = xf.slice(-1, 0, 128, 2), b = xf.slice(-1, 1, 128, 2);
    return at::stack({a * c - b * s, b * c + a * s}, -1).flatten(-2).to(at::kBFloat16);
  }
  const auto a = xf.narrow(-1, 0, 64), b = xf.narrow(-1, 64, 64);
  return at::cat({a * c - b * s, b * c + a * s}, -1).to(at::kBFloat16);
}

TEST_F(RopeNeox, TheToleranceAcceptsOneOrThreeRoundingsAndRejectsWrongRotations) {
  for (const bool heavy_tail : {false, true}) {
    // A mixed batch of Llama-3.1 at positions up to 128K (the table's largest arguments).
    Workload w = workload("llama3-8b-T37", {{"T", 1024}, {"S", 24}, {"M", 131072}});
    if (heavy_tail) w.inits["q"] = InputInit{.dist = "student_t", .std = 1.0, .df = 3.0};
    const TensorMap inputs = make_inputs(task, *code, w, heavy_tail ? 17 : 13);
    const TensorMap want = oracle(inputs);
    const at::Tensor& q = inputs.at("q");
    const at::Tensor& positions = inputs.at("positions");
    const at::Tensor& cache = inputs.at("cos_sin_cache");
    const at::Tensor rows = cache.index_select(0, positions);
    const at::Tensor index_rows = cache.index_select(0, at::arange(q.size(0), positions.options()));
    const at::Tensor next_rows = cache.index_select(0, positions + 1);
    const at::Tensor fp8_rows = rows.to(at::kFloat8_e4m3fn).to(at::kBFloat16);
    const std::map<std::string, Variant> variants = {
        {"one rounding (vLLM's CUDA op, FlashInfer)", {rotate_fp32(q, rows, false), true}},
        {"three roundings (eager)", {reference(inputs).at("q"), true}},
        {"GPT-J pairs", {rotate_fp32(q, rows, true), false}},
        {"positions ignored (row = token index)", {rotate_fp32(q, index_rows, false), false}},
        {"position off by one", {rotate_fp32(q, next_rows, false), false}},
        {"fp8 e4m3 table", {rotate_fp32(q, fp8_rows, false), false}},
    };
    for (const auto& [name, variant] : variants) {
      const auto verdict = check(task, *code, scalars, {{"q", variant.q}, {"k", want.at("k").to(at::kBFloat16)}}, want, {});
      ASSERT_EQ(verdict.comparisons.size(), 2u);
      const auto& c = verdict.comparisons[0].name == "q" ? verdict.comparisons[0] : verdict.comparisons[1];
      std::cout << (heavy_tail ? "heavy tail, " : "normal, ") << name << ": nmse " << c.nmse << ", worst excess "
                << c.worst_excess << "\n";
      EXPECT_EQ(verdict.status == Status::passed, variant.passes) << name << ": " << verdict.message;
      if (!variant.passes) EXPECT_NE(verdict.message.find("'q'"), std::string::npos) << verdict.message;
    }
  }
}

}  // namespace
}  // namespace d2k
