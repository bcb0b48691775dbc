// moe/silu_mul_fp8_quant against its originals. SGLang's fused silu-and-mul-and-quantize kernel (and the
// unfused silu_and_mul + per_token_group_quant_fp8 it replaces) rounds silu's result to bf16, rounds the
// product again, and quantizes that bf16 value per 128-column group. The reference reproduces those bits on
// hand-computed groups; the tolerances accept either quotient (exact, or by a reciprocal) and a fast
// exponential's silu, and reject y kept in fp32 (vLLM's fused block-quant kernel), a scale taken before
// y's rounding, vLLM's all-bf16 masked kernel and an amax without the absolute value.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <tuple>

#include "core/task_loader.hpp"
#include "reference/check.hpp"
#include "reference/inputs.hpp"

namespace d2k {
namespace {

const std::filesystem::path kTasks = std::filesystem::path(D2K_ROOT_DIR) / "tasks";
constexpr double kFp8Max = 448.0;
constexpr int64_t kGroup = 128;

struct Quantized {
  at::Tensor q, scales;  // fp8 [T, I], fp32 [T, I / 128]
};

at::Tensor to_fp8(const at::Tensor& v) { return v.clamp(-kFp8Max, kFp8Max).to(at::kFloat8_e4m3fn); }
at::Tensor bf16_round(const at::Tensor& v) { return v.to(at::kBFloat16).to(at::kFloat); }
at::Tensor grouped(const at::Tensor& v) { return v.reshape({v.size(0), v.size(1) / kGroup, kGroup}); }

enum class Quotient {
  exact,       // y * 448 / amax, exactly (the specification)
  reciprocal,  // y * (1 / scale) in fp32 (a model author's eager code)
  sglang,      // y * fl(448 / amax), and the scale as amax * fl(1 / 448) (SGLang's fused kernel)
};

// Group quantization of the fp32 values y with the amax taken from `amax_from`.
Quantized quantize(const at::Tensor& y, Quotient how, const at::Tensor& amax_from) {
  const at::Tensor yg = grouped(y);
  const at::Tensor amax = grouped(amax_from).abs().amax(-1, /*keepdim=*/true).clamp_min(1e-10);
  at::Tensor scale = amax / static_cast<float>(kFp8Max);
  at::Tensor q;
  switch (how) {
    case Quotient::exact:
      // For bf16 y and amax the double quotient is exact where it is an fp8 midpoint and far from one
      // otherwise, so its cast through float cannot move it across a rounding boundary.
      q = to_fp8((yg.to(at::kDouble) * kFp8Max / amax.to(at::kDouble)).to(at::kFloat));
      break;
    case Quotient::reciprocal: q = to_fp8(yg * scale.reciprocal()); break;
    case Quotient::sglang:
      q = to_fp8(yg * (static_cast<float>(kFp8Max) / amax));
      scale = amax * (1.0f / static_cast<float>(kFp8Max));
      break;
  }
  return {q.reshape(y.sizes()), scale.squeeze(-1)};
}
Quantized quantize(const at::Tensor& y, Quotient how) { return quantize(y, how, y); }

struct SiluMulFp8Quant : ::testing::Test {
  Task task = load_task(kTasks, std::string("moe/silu_mul_fp8_quant"));
  std::unique_ptr<TaskCode> code = make_task_code("moe/silu_mul_fp8_quant");

  static Scalars scalars() {
    Scalars s;
    s.values["group_size"] = static_cast<double>(kGroup);
    s.values["eps"] = 1e-10;
    return s;
  }
  TensorMap reference(const at::Tensor& x) const {
    TensorMap inputs{{"x", x}};
    return code->reference(inputs, scalars());
  }
  Verdict check_against_oracle(const at::Tensor& x, const Quantized& got) const {
    const TensorMap want = reference(x.to(at::kDouble));
    return check(task, *code, scalars(), {{"q", got.q}, {"scales", got.scales}}, want, {});
  }
  TensorMap inputs_of(const std::string& workload_name, int64_t T, uint64_t seed) const {
    Workload workload = *std::find_if(task.workloads.begin(), task.workloads.end(),
                                      [&](const Workload& w) { return w.name == workload_name; });
    workload.axes["T"] = T;
    workload.layouts.clear();  // the variants below write row-major scales
    return make_inputs(task, *code, workload, seed);
  }
};

TEST_F(SiluMulFp8Quant, TheReferenceRoundsSiluAndTheProductBeforeTheAmaxAndTheQuotient) {
  // One group of 128 columns, zeros outside columns 0 to 2. Column 0: gate 2, up 1: silu(2) = 1.7615942
  // rounds to the bf16 value 1.7578125, the group's amax, so q = 448. Column 1: gate -100, where exp(100)
  // overflows in fp32 and silu is -0. Column 2: gate 2, up 0.75: 1.7578125 * 0.75 = 1.3183594 rounds to
  // 1.3203125, so q = 1.3203125 * 448 / 1.7578125 = 336.5, which rounds to the fp8 value 352 (the step is
  // 32 there). Unrounded, the quotient would be exactly 0.75 * 448 = 336, a midpoint, and tie to 320: the
  // bf16 roundings decide this element, and the float64 oracle keeps them.
  at::Tensor x = at::zeros({1, 2 * kGroup}, at::kFloat);
  x[0][0] = 2.0f, x[0][kGroup] = 1.0f;
  x[0][1] = -100.0f, x[0][kGroup + 1] = 3.0f;
  x[0][2] = 2.0f, x[0][kGroup + 2] = 0.75f;
  for (const auto dtype : {at::kBFloat16, at::kDouble}) {
    const TensorMap out = reference(x.to(dtype));
    const at::Tensor q = out.at("q").to(at::kFloat);
    EXPECT_EQ(out.at("scales").item<double>(), dtype == at::kDouble ? 1.7578125 / 448.0 : 1.7578125f / 448.0f);
    EXPECT_EQ(q[0][0].item<float>(), 448.0f);
    EXPECT_EQ(q[0][1].item<float>(), 0.0f);
    EXPECT_TRUE(std::signbit(q[0][1].item<float>())) << "silu(-100) * 3 is -0";
    EXPECT_EQ(q[0][2].item<float>(), 352.0f);
  }
  // An all-zero group: the amax is eps, the scale eps / 448, and q is 0.
  const TensorMap zero = reference(at::zeros({1, 2 * kGroup}, at::kBFloat16));
  EXPECT_EQ(zero.at("scales").item<float>(), 1e-10f / 448.0f);
  EXPECT_EQ(zero.at("q").to(at::kFloat).abs().sum().item<float>(), 0.0f);
}

// Every variant of one draw: name -> (outputs, must pass).
using Variants = std::map<std::string, std::pair<Quantized, bool>>;
Variants variants_of(const at::Tensor& x_bf16, uint64_t seed) {
  const int64_t I = x_bf16.size(1) / 2;
  const at::Tensor g = x_bf16.narrow(1, 0, I).to(at::kFloat), u = x_bf16.narrow(1, I, I).to(at::kFloat);
  const at::Tensor silu = g / (1.0f + at::exp(-g));
  const at::Tensor y = bf16_round(bf16_round(silu) * u);  // the specification's two roundings
  // A fast exponential (__expf, ex2.approx): silu off by up to a few fp32 ulps before its rounding.
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::Tensor wobble = at::empty(silu.sizes(), at::kFloat).uniform_(-4e-7, 4e-7, generator);
  const at::Tensor y_fast_exp = bf16_round(bf16_round(silu * (1.0f + wobble)) * u);
  const at::Tensor y_fp32 = silu * u;
  // vLLM's persistent_masked_m_silu_mul_quant: y in bf16, the scale bf16(amax * bf16(1 / 448)), the
  // quotient bf16(y * bf16(1 / scale)), all in bf16 arithmetic.
  const at::Tensor amax_bf16 = grouped(y).abs().amax(-1, /*keepdim=*/true).clamp_min(1e-10);
  const at::Tensor scale_bf16 = bf16_round(amax_bf16 * bf16_round(at::full({}, 1.0f / 448.0f)));
  Quantized all_bf16{to_fp8(bf16_round(grouped(y) * bf16_round(1.0f / scale_bf16))).reshape(y.sizes()),
                     scale_bf16.squeeze(-1)};
  // The amax without the absolute value: the largest value, not the largest magnitude.
  const at::Tensor signed_max = grouped(y).amax(-1, /*keepdim=*/true).clamp_min(1e-10);
  const at::Tensor scale_signed = signed_max / static_cast<float>(kFp8Max);
  Quantized no_abs{to_fp8(grouped(y) / scale_signed).reshape(y.sizes()), scale_signed.squeeze(-1)};
  return {
      {"spec: exact quotient", {quantize(y, Quotient::exact), true}},
      {"eager: y * (1 / scale)", {quantize(y, Quotient::reciprocal), true}},
      {"SGLang fused: y * (448 / amax), scale amax * (1 / 448)", {quantize(y, Quotient::sglang), true}},
      {"a fast exponential's silu", {quantize(y_fast_exp, Quotient::sglang), true}},
      {"wrong: y kept in fp32 (vLLM's fused block quant)", {quantize(y_fp32, Quotient::exact), false}},
      {"wrong: the scale taken before y's rounding", {quantize(y, Quotient::exact, y_fp32), false}},
      {"wrong: all in bf16, the scale too (vLLM's masked kernel)", {all_bf16, false}},
      {"wrong: the amax without the absolute value", {no_abs, false}},
  };
}

TEST_F(SiluMulFp8Quant, TheToleranceAcceptsEitherQuotientAndAFastExpAndRejectsOtherRoundings) {
  // (workload whose distributions are drawn, rows)
  const std::vector<std::pair<std::string, int64_t>> draws = {
      {"deepseek-v3-T4096", 512}, {"qwen3-235b-T2048-student-t", 512}, {"deepseek-v3-T37-colmajor", 37},
      {"qwen3-235b-T19-student-t", 19}};
  for (const auto& [workload, rows] : draws) {
    const TensorMap in = inputs_of(workload, rows, 23);
    for (const auto& [name, variant] : variants_of(in.at("x"), 5)) {
      const Verdict verdict = check_against_oracle(in.at("x"), variant.first);
      std::cout << workload << " x " << rows << ", " << name << ": " << verdict.message;
      for (const Comparison& c : verdict.comparisons) {
        std::cout << " | " << c.name << " nmse " << c.nmse << " worst excess " << c.worst_excess
                  << " mismatches " << c.mismatches;
        if (c.misrounded) std::cout << " misrounded " << *c.misrounded;
      }
      std::cout << "\n";
      EXPECT_EQ(verdict.status == Status::passed, variant.second) << workload << ", " << name << ": " << verdict.message;
    }
  }
}

// The smallest workloads give the statistics the fewest elements to average over: the correct variants
// must pass on every seed and the wrong ones fail on every seed (the corpus entry runs on a smoke
// workload). Printed: the range of the dequantized nmse and of q's misrounded share.
TEST_F(SiluMulFp8Quant, EverySeedOfTheSmallWorkloadsSeparatesTheVariants) {
  // (workload, rows, seeds): the two smoke workloads, and a single row of DeepSeek-V3's width, smaller
  // than any workload, as the harshest case.
  for (const auto& [workload, rows, seeds] : std::vector<std::tuple<std::string, int64_t, uint64_t>>{
           {"deepseek-v3-T37-colmajor", 37, 12}, {"qwen3-235b-T19-student-t", 19, 40}, {"deepseek-v3-T128", 1, 100}}) {
    std::map<std::string, std::pair<double, double>> nmse_range;  // dequant nmse: best, worst
    std::map<std::string, std::pair<double, double>> share_range;  // q's misrounded share: best, worst
    for (uint64_t seed = 1; seed <= seeds; ++seed) {
      const TensorMap in = inputs_of(workload, rows, seed);
      for (const auto& [name, variant] : variants_of(in.at("x"), seed)) {
        const Verdict verdict = check_against_oracle(in.at("x"), variant.first);
        EXPECT_EQ(verdict.status == Status::passed, variant.second)
            << workload << " seed " << seed << ", " << name << ": " << verdict.message;
        for (const Comparison& c : verdict.comparisons) {
          if (c.name == "dequant") {
            auto [it, fresh] = nmse_range.try_emplace(name, c.nmse, c.nmse);
            it->second = {std::min(it->second.first, c.nmse), std::max(it->second.second, c.nmse)};
          } else if (c.name == "q" && c.misrounded) {
            auto [it, fresh] = share_range.try_emplace(name, *c.misrounded, *c.misrounded);
            it->second = {std::min(it->second.first, *c.misrounded), std::max(it->second.second, *c.misrounded)};
          }
        }
      }
    }
    for (const auto& [name, range] : nmse_range) {
      std::cout << workload << " x " << rows << ", " << seeds << " seeds, " << name << ": dequant nmse " << range.first
                << " to " << range.second << ", q misrounded " << share_range[name].first << " to "
                << share_range[name].second << "\n";
    }
  }
}

}  // namespace
}  // namespace d2k
