// quant/int8_gemm against its original, vLLM's cutlass_scaled_mm with per-token and per-channel scales and
// a bias: D = bf16(s_a * (s_b * float(A B^T)) + bias), the int32 product exact and one rounding at the end.
// A hand-computed case pins the semantics; drawn workload inputs measure the tolerance against what a
// correct fp32 epilogue does and against the wrong variants a hurried implementer writes.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include "core/task_loader.hpp"
#include "reference/check.hpp"
#include "reference/inputs.hpp"

namespace d2k {
namespace {

const std::filesystem::path kTasks = std::filesystem::path(D2K_ROOT_DIR) / "tasks";

struct Int8Gemm : ::testing::Test {
  Task task = load_task(kTasks, std::string("quant/int8_gemm"));
  std::unique_ptr<TaskCode> code = make_task_code("quant/int8_gemm");

  at::Tensor reference(TensorMap inputs) const { return code->reference(inputs, {}).at("d"); }
  // The float64 oracle as the harness runs it: floating inputs upcast, the int8 ones as they are.
  at::Tensor oracle(TensorMap inputs) const {
    for (auto& [name, tensor] : inputs)
      if (at::isFloatingType(tensor.scalar_type())) tensor = tensor.to(at::kDouble);
    return reference(inputs);
  }
  Verdict check_against(const at::Tensor& want, const at::Tensor& got) const {
    return check(task, *code, {}, {{"d", got}}, {{"d", want}}, {});
  }
  TensorMap workload_inputs(int64_t M, int64_t N, int64_t K, uint64_t seed) const {
    Workload workload = *task.find_workload("llama3-8b-o-M19-N136");
    workload.axes = {{"M", M}, {"N", N}, {"K", K}};
    return make_inputs(task, *code, workload, seed);
  }
};

TEST_F(Int8Gemm, TheReferenceMultipliesExactlyThenScalesAndAddsTheBiasInFp32) {
  // acc = [[48387, 381], [-762, -6]]; bf16 keeps 8 significant bits, so values near 6049 are 32 apart
  // and values near 572 are 4 apart.
  const auto i8 = at::TensorOptions().dtype(at::kChar);
  const at::Tensor a = at::tensor({127, 127, 127, -1, -2, -3}, i8).view({2, 3});
  const at::Tensor b = at::tensor({127, 127, 127, 1, 1, 1}, i8).view({2, 3});
  TensorMap inputs{{"a", a},
                   {"b", b},
                   {"s_a", at::tensor({0.5f, 2.0f})},
                   {"s_b", at::tensor({0.25f, 3.0f})},
                   {"bias", at::tensor({1.0f, 1.0f}).to(at::kBFloat16)}};
  const at::Tensor d = reference(inputs);
  ASSERT_EQ(d.scalar_type(), at::kBFloat16);
  const at::Tensor got = d.to(at::kFloat);
  EXPECT_EQ(got[0][0].item<float>(), 6048.0f);   // 48387 * 0.25 * 0.5 + 1 = 6049.375 -> 6048
  EXPECT_EQ(got[1][0].item<float>(), -380.0f);   // -762 * 0.25 * 2 + 1, exact
  EXPECT_EQ(got[0][1].item<float>(), 572.0f);    // 381 * 3 * 0.5 + 1 = 572.5 -> 572
  EXPECT_EQ(got[1][1].item<float>(), -35.0f);    // -6 * 3 * 2 + 1
  // The oracle keeps the float64 value unrounded.
  EXPECT_EQ(oracle(inputs)[0][0].item<double>(), 6049.375);
}

TEST_F(Int8Gemm, InputsAreQuantizedWithTheirTrueScales) {
  const TensorMap inputs = workload_inputs(64, 48, 1024, 7);
  for (const char* name : {"a", "b"}) {
    const at::Tensor codes = inputs.at(name);
    ASSERT_EQ(codes.scalar_type(), at::kChar) << name;
    // amax / 127 per row: every row reaches +-127 and none goes beyond (no -128).
    EXPECT_TRUE(codes.to(at::kInt).abs().amax(1).eq(127).all().item<bool>()) << name;
  }
  // Outlier channels: K / 128 = 8 channels, shared by every token, far larger than the median channel.
  const at::Tensor channel = std::get<0>(inputs.at("a").to(at::kFloat).abs().mean(0).sort(0, /*descending=*/true));
  EXPECT_GT((channel[7] / channel.median()).item<float>(), 5.0f);
  EXPECT_LT((channel[8] / channel.median()).item<float>(), 2.0f);
  // The scales span the tokens' magnitudes.
  const at::Tensor s_a = inputs.at("s_a");
  EXPECT_GT((s_a.max() / s_a.min()).item<float>(), 2.0f);
}

TEST_F(Int8Gemm, TheToleranceAcceptsTheFp32EpilogueAndRejectsTheWrongVariants) {
  for (const bool square : {false, true}) {
    // Square: M == N, so that a solution exchanging s_a and s_b reads valid memory and is wrong by value only.
    const int64_t M = square ? 256 : 128, N = square ? 256 : 512, K = 4096;
    const TensorMap inputs = workload_inputs(M, N, K, square ? 11 : 5);
    const at::Tensor& a = inputs.at("a");
    const at::Tensor& b = inputs.at("b");
    const at::Tensor s_a = inputs.at("s_a").unsqueeze(1), s_b = inputs.at("s_b").unsqueeze(0);
    const at::Tensor bias = inputs.at("bias").to(at::kFloat);
    const at::Tensor acc = at::_int_mm(a, b.t()).to(at::kFloat);
    const auto bf16 = [](const at::Tensor& x) { return x.to(at::kBFloat16).to(at::kFloat); };
    std::map<std::string, std::pair<at::Tensor, bool>> variants = {
        {"the reference (fp32 epilogue, one rounding)", {reference(inputs), true}},
        {"vLLM's order with fused multiply-adds", {at::addcmul(bias, s_a, s_b * acc).to(at::kBFloat16), true}},
        {"scales applied in bf16 before a bf16 GEMM",
         {(at::matmul(bf16(a.to(at::kFloat) * s_a), bf16(b.to(at::kFloat) * s_b.t()).t()) + bias).to(at::kBFloat16), false}},
        {"epilogue rounded to bf16 after the scales", {(bf16(acc * s_a * s_b) + bias).to(at::kBFloat16), false}},
        {"bias dropped", {(acc * s_a * s_b).to(at::kBFloat16), false}},
    };
    if (square) variants["s_a and s_b exchanged"] = {(acc * s_b.t() * s_a.t() + bias).to(at::kBFloat16), false};
    const at::Tensor want = oracle(inputs);
    for (const auto& [name, variant] : variants) {
      const auto verdict = check_against(want, variant.first);
      ASSERT_EQ(verdict.comparisons.size(), 1u);
      const auto& c = verdict.comparisons[0];
      std::cout << M << "x" << N << "x" << K << ", " << name << ": nmse " << c.nmse << ", worst excess " << c.worst_excess
                << ", misrounded " << c.misrounded.value_or(-1) << "\n";
      EXPECT_EQ(verdict.status == Status::passed, variant.second) << name << ": " << verdict.message;
    }
  }
}

}  // namespace
}  // namespace d2k
