// act/silu_and_mul against its originals: the reference reproduces vLLM's bits (silu rounded to bf16, then
// the product rounded), and the task's tolerance accepts vLLM's two roundings and FlashInfer's one while it
// rejects an fp8 silu. A truncated product is printed, not asserted: its nmse sits too close to two correct
// roundings for nmse to reject it (task.toml says so).
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>

#include "core/task_loader.hpp"
#include "reference/check.hpp"

namespace d2k {
namespace {

const std::filesystem::path kTasks = std::filesystem::path(D2K_ROOT_DIR) / "tasks";

// Round to nearest even, as a CUDA __float2bfloat16_rn or a torch bf16 cast does (finite values).
float round_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// vLLM's act_and_mul_kernel with act_first: (bf16)(g / (1 + exp(-g))) * u, rounded again.
float vllm_silu_and_mul(float g, float u) { return round_bf16(round_bf16(g / (1.0f + std::exp(-g))) * u); }

struct SiluAndMul : ::testing::Test {
  Task task = load_task(kTasks, std::string("act/silu_and_mul"));
  std::unique_ptr<TaskCode> code = make_task_code("act/silu_and_mul");
  Scalars scalars;

  at::Tensor reference(const at::Tensor& x) const {
    TensorMap inputs{{"x", x}};
    return code->reference(inputs, scalars).at("out");
  }
  // The check of `got` against the float64 oracle of `x`.
  Verdict check_against_oracle(const at::Tensor& x, const at::Tensor& got) const {
    const TensorMap want{{"out", reference(x.to(at::kDouble))}};
    return check(task, *code, scalars, {{"out", got}}, want, {});
  }
};

TEST_F(SiluAndMul, TheReferenceReproducesVllmsTwoRoundingsOnAHandComputedRow) {
  // Gate values across silu's range, including one where exp(-g) overflows in fp32 (silu is -0 there).
  const std::vector<float> gate = {-120.0f, -9.5f, -1.25f, -0.0078125f, 0.0f, 0.4375f, 1.5f, 3.75f, 17.0f, 300.0f};
  const std::vector<float> up = {2.0f, -0.75f, 1.125f, 3.0f, -5.0f, 0.3125f, -1.0f, 0.0625f, 1.5f, -0.5f};
  const auto n = static_cast<int64_t>(gate.size());
  at::Tensor x = at::empty({1, 2 * n}, at::kFloat);
  for (int64_t i = 0; i < n; ++i) {
    x[0][i] = gate[i];
    x[0][n + i] = up[i];
  }
  const at::Tensor out = reference(x.to(at::kBFloat16)).to(at::kFloat);
  for (int64_t i = 0; i < n; ++i) {
    const float want = vllm_silu_and_mul(gate[i], up[i]);
    EXPECT_EQ(out[0][i].item<float>(), want) << "g " << gate[i] << ", u " << up[i];
  }
  EXPECT_TRUE(std::signbit(out[0][0].item<float>())) << "silu(-120) * 2 is -0";
}

TEST_F(SiluAndMul, TheToleranceAcceptsOneOrTwoRoundingsAndRejectsAnFp8Silu) {
  for (const bool heavy_tail : {false, true}) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(heavy_tail ? 11 : 7);
    at::Tensor x = at::normal(0.0, heavy_tail ? 6.0 : 1.5, {256, 2 * 1024}, generator, at::TensorOptions());
    if (heavy_tail) x = x * at::exp(at::normal(0.0, 1.0, x.sizes(), generator, at::TensorOptions()));  // log-normal scale
    x = x.to(at::kBFloat16);
    const at::Tensor g = x.narrow(1, 0, 1024).to(at::kFloat), u = x.narrow(1, 1024, 1024).to(at::kFloat);
    const at::Tensor silu = g / (1.0 + at::exp(-g));
    at::Tensor product = silu * u;
    const at::Tensor truncated = at::bitwise_and(product.view(at::kInt), static_cast<int64_t>(0xffff0000u)).view(at::kFloat);
    // name -> (output, must pass); nullopt: printed only.
    const std::map<std::string, std::pair<at::Tensor, std::optional<bool>>> variants = {
        {"two roundings (vLLM, eager)", {reference(x), true}},
        {"one rounding (FlashInfer)", {(silu * u).to(at::kBFloat16), true}},
        {"fp8 e4m3 silu", {(silu.to(at::kFloat8_e4m3fn).to(at::kFloat) * u).to(at::kBFloat16), false}},
        {"truncated product", {truncated.to(at::kBFloat16), std::nullopt}},
    };
    for (const auto& [name, variant] : variants) {
      const auto verdict = check_against_oracle(x, variant.first);
      ASSERT_EQ(verdict.comparisons.size(), 1u);
      std::cout << (heavy_tail ? "heavy tail, " : "normal, ") << name << ": nmse " << verdict.comparisons[0].nmse
                << ", worst excess " << verdict.comparisons[0].worst_excess << "\n";
      if (variant.second) EXPECT_EQ(verdict.status == Status::passed, *variant.second) << name << ": " << verdict.message;
    }
  }
}

}  // namespace
}  // namespace d2k
