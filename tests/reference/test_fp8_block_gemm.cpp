// quant/fp8_block_gemm against its originals, DeepSeek-V3's fp8_gemm and vLLM's w8a8_block_fp8_matmul:
// per 128-wide K block, the fp32 dot product of the e4m3 codes times sa[m, kb] * sb[n / 128, kb], summed
// over blocks in fp32, one rounding to bf16. A hand-computed case pins the semantics and the scale
// layouts; drawn workload inputs measure the tolerance against the task's fp32 semantics, a model of
// Hopper's reduced-precision fp8 accumulation, the eager bf16 dequantization and the wrong variants a
// hurried implementer writes.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <optional>

#include "core/task_loader.hpp"
#include "reference/check.hpp"
#include "reference/inputs.hpp"

namespace d2k {
namespace {

const std::filesystem::path kTasks = std::filesystem::path(D2K_ROOT_DIR) / "tasks";
constexpr int64_t kBlock = 128;

struct Fp8BlockGemm : ::testing::Test {
  Task task = load_task(kTasks, std::string("quant/fp8_block_gemm"));
  std::unique_ptr<TaskCode> code = make_task_code("quant/fp8_block_gemm");

  at::Tensor reference(TensorMap inputs) const { return code->reference(inputs, {}).at("c"); }
  // The float64 oracle as the harness runs it: every floating input upcast, the fp8 codes included.
  at::Tensor oracle(TensorMap inputs) const {
    for (auto& [name, tensor] : inputs)
      if (at::isFloatingType(tensor.scalar_type())) tensor = tensor.to(at::kDouble);
    return reference(inputs);
  }
  Verdict check_against(const at::Tensor& want, const at::Tensor& got) const {
    return check(task, *code, {}, {{"c", got}}, {{"c", want}}, {});
  }
  TensorMap workload_inputs(int64_t M, int64_t N, int64_t K, uint64_t seed, const char* like) const {
    Workload workload = *task.find_workload(like);
    workload.axes = {{"M", M}, {"N", N}, {"K", K}};
    return make_inputs(task, *code, workload, seed);
  }
};

at::Tensor e4m3(std::vector<float> values, int64_t rows, int64_t cols) {
  return at::tensor(values).view({rows, cols}).to(at::kFloat8_e4m3fn);
}

// `rows` x 128 * blocks values, block kb of row r filled with values[r][kb].
at::Tensor blocks(const std::vector<std::vector<float>>& values) {
  std::vector<float> flat;
  for (const auto& row : values)
    for (float v : row) flat.insert(flat.end(), kBlock, v);
  return e4m3(flat, static_cast<int64_t>(values.size()), static_cast<int64_t>(values[0].size()) * kBlock);
}

TEST_F(Fp8BlockGemm, EachBlockIsScaledByItsOwnTokenAndWeightBlockScales) {
  // K = 256: two blocks. a row 0: 1 then 2; row 1: 1.5 then 0.0625. b row 0: 1, 1; row 1: -0.875, -0.875.
  // sa = [[0.5, 0.25], [3, 0.1]], sb = [[1, 4]] (one 128-row block of the weight covers N = 2).
  TensorMap inputs{{"a", blocks({{1.0f, 2.0f}, {1.5f, 0.0625f}})},
                   {"sa", at::tensor({0.5f, 0.25f, 3.0f, 0.1f}).view({2, 2})},
                   {"b", blocks({{1.0f, 1.0f}, {-0.875f, -0.875f}})},
                   {"sb", at::tensor({1.0f, 4.0f}).view({1, 2})}};
  const at::Tensor c = reference(inputs);
  ASSERT_EQ(c.scalar_type(), at::kBFloat16);
  const at::Tensor got = c.to(at::kFloat);
  EXPECT_EQ(got[0][0].item<float>(), 320.0f);    // 128 * 1 * 1 * 0.5 * 1 + 128 * 2 * 1 * 0.25 * 4 = 64 + 256
  EXPECT_EQ(got[0][1].item<float>(), -280.0f);   // -56 - 224
  EXPECT_EQ(got[1][0].item<float>(), 580.0f);    // 576 + 128 * 0.0625 * 0.1 * 4 = 579.2, bf16 steps of 4 -> 580
  EXPECT_EQ(got[1][1].item<float>(), -506.0f);   // -504 - 2.8 = -506.8, steps of 2 -> -506
  // The oracle keeps the exact value (0.1 is the fp32 0.1 widened).
  EXPECT_NEAR(oracle(inputs)[1][0].item<double>(), 576.0 + 32.0 * static_cast<double>(0.1f), 1e-12);
  // A scale applied once after the whole K sum (the first block's) gives 600 for element (1, 0), not 579.2.
}

TEST_F(Fp8BlockGemm, InputsAreQuantizedPerBlockWithTheirTrueScalesInTheTasksLayouts) {
  const int64_t M = 37, N = 208, K = 1024;  // sa's columns padded to 40; sb has 2 rows (208 = 128 + 80)
  const TensorMap inputs = workload_inputs(M, N, K, 7, "deepseek-v3-q_b-M19-N208");
  const at::Tensor& sa = inputs.at("sa");
  const at::Tensor& sb = inputs.at("sb");
  ASSERT_EQ(sa.sizes(), (at::IntArrayRef{M, K / kBlock}));
  EXPECT_EQ(sa.strides(), (at::IntArrayRef{1, 40}));  // MN-major, columns aligned to 4 tokens
  ASSERT_EQ(sb.sizes(), (at::IntArrayRef{2, K / kBlock}));
  EXPECT_TRUE(sb.is_contiguous());
  // Every block reaches the top of the e4m3 range (amax / 448) and none goes beyond.
  const at::Tensor a = inputs.at("a").to(at::kFloat).abs().view({M, K / kBlock, kBlock}).amax(-1);
  EXPECT_TRUE(a.eq(448).all().item<bool>());
  const at::Tensor b = at::constant_pad_nd(inputs.at("b").to(at::kFloat).abs(), {0, 0, 0, 256 - N})
                           .view({2, kBlock, K / kBlock, kBlock}).amax({1, 3});
  EXPECT_TRUE(b.eq(448).all().item<bool>());
  // The weight blocks' scales differ by several times, the tokens' too.
  EXPECT_GT((sb.max() / sb.min()).item<float>(), 3.0f);
  EXPECT_GT((sa.max() / sa.min()).item<float>(), 3.0f);
}

// One wgmma k-step of 32 products added to a partial sum the way Hopper's fp8 path is described to do it
// (DeepSeek-V3's report, section 3.3.2: about 14 bits kept): every addend aligned to the largest exponent
// among them and truncated toward zero 13 bits below it. A pessimistic model of the hardware.
at::Tensor add_step_truncated(const at::Tensor& partial, const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor terms = at::cat({(a.unsqueeze(1) * b.unsqueeze(0)), partial.unsqueeze(-1)}, -1);  // [M, N, 33]
  const at::Tensor top = std::get<1>(at::frexp(terms.abs().amax(-1, /*keepdim=*/true)));
  const at::Tensor quantum = at::ldexp(at::ones_like(terms.narrow(-1, 0, 1)), top - 14);
  return (at::trunc(terms / quantum) * quantum).sum(-1);
}

TEST_F(Fp8BlockGemm, TheToleranceAcceptsPerBlockFp32AndRejectsTheWrongVariants) {
  struct Case {
    int64_t M, N, K;
    const char* like;  // the workload whose distributions the draw takes
  };
  for (const Case& shape : {Case{128, 256, 4096, "deepseek-v3-q_b-M19-N208"}, Case{64, 128, 16384, "deepseek-v3-o_proj-M3-N64"}}) {
    const int64_t M = shape.M, N = shape.N, K = shape.K, KB = K / kBlock;
    const TensorMap inputs = workload_inputs(M, N, K, 5, shape.like);
    const at::Tensor a = inputs.at("a").to(at::kFloat), b = inputs.at("b").to(at::kFloat);
    const at::Tensor sa = inputs.at("sa").contiguous();
    const at::Tensor sb_rows = inputs.at("sb").repeat_interleave(kBlock, 0).narrow(0, 0, N);  // [N, KB]
    const auto block_product = [&](int64_t kb) {
      return at::matmul(a.narrow(1, kb * kBlock, kBlock), b.narrow(1, kb * kBlock, kBlock).t());
    };
    const auto scales = [&](int64_t kb) { return sa.narrow(1, kb, 1) * sb_rows.narrow(1, kb, 1).t(); };  // [M, N]
    at::Tensor exact = at::zeros({M, N}), hopper = at::zeros({M, N}), bf16_acc = at::zeros({M, N});
    at::Tensor wrong_block = at::zeros({M, N});
    for (int64_t kb = 0; kb < KB; ++kb) {
      exact += block_product(kb) * scales(kb);
      // Four wgmma k-steps of 32, each added to a 14-bit partial sum.
      at::Tensor partial = at::zeros({M, N});
      for (int64_t step = 0; step < kBlock; step += 32) {
        const int64_t k = kb * kBlock + step;
        partial = add_step_truncated(partial, a.narrow(1, k, 32), b.narrow(1, k, 32));
      }
      hopper += partial * scales(kb);
      bf16_acc = (bf16_acc + block_product(kb) * scales(kb)).to(at::kBFloat16).to(at::kFloat);
      // The weight scale of the next K block: sb read with its two indices' strides mixed up.
      wrong_block += block_product(kb) * sa.narrow(1, kb, 1) * sb_rows.narrow(1, (kb + 1) % KB, 1).t();
    }
    const at::Tensor once = at::matmul(a, b.t()) * sa.narrow(1, 0, 1) * sb_rows.narrow(1, 0, 1).t();
    const auto bf16 = [](const at::Tensor& x) { return x.to(at::kBFloat16); };
    // Whether each variant must pass; the eager path is held to neither (see task.toml).
    std::map<std::string, std::pair<at::Tensor, std::optional<bool>>> variants = {
        {"per-block fp32 (the task's semantics)", {bf16(exact), true}},
        {"Hopper's fp8 accumulation (aligned, truncated to 14 bits), promoted per block", {bf16(hopper), true}},
        {"eager: both operands dequantized to bf16, bf16 matmul", {reference(inputs), std::nullopt}},
        {"scale applied once after the K sum (first block's)", {bf16(once), false}},
        {"accumulator across blocks kept in bf16", {bf16(bf16_acc), false}},
        {"weight scale of the wrong K block", {bf16(wrong_block), false}},
    };
    const at::Tensor want = oracle(inputs);
    for (const auto& [name, variant] : variants) {
      const auto verdict = check_against(want, variant.first);
      ASSERT_EQ(verdict.comparisons.size(), 1u);
      const auto& c = verdict.comparisons[0];
      std::cout << M << "x" << N << "x" << K << ", " << name << ": nmse " << c.nmse << ", worst excess " << c.worst_excess
                << "\n";
      if (variant.second) EXPECT_EQ(verdict.status == Status::passed, *variant.second) << name << ": " << verdict.message;
    }
  }
}

}  // namespace
}  // namespace d2k
