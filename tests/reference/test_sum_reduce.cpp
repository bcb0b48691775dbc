// moe/sum_reduce against its originals: SGLang's moe_sum_reduce accumulates the k expert outputs in fp32
// and rounds once after the scaling; the eager fallback rounds the sum, then the product. The task's
// tolerance accepts both and rejects vLLM's moe_sum order of accumulating in bf16 (a rounding after every
// add), which loses precision when the experts' outputs cancel.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include "core/task_loader.hpp"
#include "reference/check.hpp"

namespace d2k {
namespace {

const std::filesystem::path kTasks = std::filesystem::path(D2K_ROOT_DIR) / "tasks";

struct SumReduce : ::testing::Test {
  Task task = load_task(kTasks, std::string("moe/sum_reduce"));
  std::unique_ptr<TaskCode> code = make_task_code("moe/sum_reduce");

  Scalars scalars_of(double scale) const {
    Scalars scalars;
    scalars.values["routed_scaling_factor"] = scale;
    return scalars;
  }
  at::Tensor reference(const at::Tensor& x, double scale) const {
    TensorMap inputs{{"x", x}};
    return code->reference(inputs, scalars_of(scale)).at("out");
  }
  Verdict check_against_oracle(const at::Tensor& x, double scale, const at::Tensor& got) const {
    const TensorMap want{{"out", reference(x.to(at::kDouble), scale)}};
    return check(task, *code, scalars_of(scale), {{"out", got}}, want, {});
  }
};

TEST_F(SumReduce, TheReferenceSumsInFp32AndRoundsTheSumThenTheProduct) {
  // Three experts whose bf16 sum in bf16 arithmetic loses the small one: 256 + 1 rounds to 256 in bf16
  // (8 significant bits), and - 256 then leaves 0, where fp32 accumulation keeps the 1.
  at::Tensor x = at::zeros({1, 3, 2}, at::kFloat);
  x[0][0][0] = 256.0f, x[0][1][0] = 1.0f, x[0][2][0] = -256.0f;
  x[0][0][1] = 1.5f, x[0][1][1] = 0.25f, x[0][2][1] = -0.125f;
  const at::Tensor out = reference(x.to(at::kBFloat16), 2.5).to(at::kFloat);
  EXPECT_EQ(out[0][0].item<float>(), 2.5f);                    // (256 + 1 - 256) * 2.5, the 1 kept
  EXPECT_EQ(out[0][1].item<float>(), 4.0625f);                 // 1.625 * 2.5 = 4.0625, exact in bf16
}

TEST_F(SumReduce, TheToleranceAcceptsOneOrTwoRoundingsAndRejectsAccumulatingInBf16) {
  for (const bool heavy_tail : {false, true}) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(heavy_tail ? 5 : 3);
    at::Tensor x = at::normal(0.0, 1.0, {128, 8, 2048}, generator, at::TensorOptions());
    if (heavy_tail) x = x * at::exp(1.5 * at::normal(0.0, 1.0, x.sizes(), generator, at::TensorOptions()));
    x = x.to(at::kBFloat16);
    const double scale = 2.5;
    const at::Tensor sum = x.to(at::kFloat).sum(1);
    at::Tensor bf16_sum = x.select(1, 0);
    for (int64_t k = 1; k < 8; ++k) bf16_sum = (bf16_sum.to(at::kFloat) + x.select(1, k).to(at::kFloat)).to(at::kBFloat16);
    const std::map<std::string, std::pair<at::Tensor, bool>> variants = {
        {"one rounding (SGLang)", {(sum * scale).to(at::kBFloat16), true}},
        {"two roundings (eager)", {reference(x, scale), true}},
        {"accumulated in bf16 (vLLM's moe_sum order)", {(bf16_sum.to(at::kFloat) * scale).to(at::kBFloat16), false}},
    };
    for (const auto& [name, variant] : variants) {
      const auto verdict = check_against_oracle(x, scale, variant.first);
      ASSERT_EQ(verdict.comparisons.size(), 1u);
      std::cout << (heavy_tail ? "heavy tail, " : "normal, ") << name << ": nmse " << verdict.comparisons[0].nmse
                << ", worst excess " << verdict.comparisons[0].worst_excess << "\n";
      EXPECT_EQ(verdict.status == Status::passed, variant.second) << name << ": " << verdict.message;
    }
  }
}

}  // namespace
}  // namespace d2k
