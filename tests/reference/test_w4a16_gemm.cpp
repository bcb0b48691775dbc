// quant/w4a16_gemm against its originals: AutoGPTQ's pack format (qweight [K / 8, N] int32, k = 8i + j in
// bits 4j .. 4j + 3 of row i) and the symmetric dequantization w = (q - 8) * scale[k / 128, n] that vLLM's
// gptq and gptq_marlin kernels apply. A hand-packed case pins the bit layout, the zero point and the group
// indexing; drawn workload inputs measure the tolerance against correct orders and the wrong zero points.
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

struct W4A16Gemm : ::testing::Test {
  Task task = load_task(kTasks, std::string("quant/w4a16_gemm"));
  std::unique_ptr<TaskCode> code = make_task_code("quant/w4a16_gemm");

  at::Tensor reference(TensorMap inputs) const { return code->reference(inputs, {}).at("y"); }
  // The float64 oracle as the harness runs it: floating inputs upcast, qweight as it is.
  at::Tensor oracle(TensorMap inputs) const {
    for (auto& [name, tensor] : inputs)
      if (at::isFloatingType(tensor.scalar_type())) tensor = tensor.to(at::kDouble);
    return reference(inputs);
  }
  Verdict check_against(const at::Tensor& want, const at::Tensor& got) const {
    return check(task, *code, {}, {{"y", got}}, {{"y", want}}, {});
  }
  TensorMap workload_inputs(int64_t M, int64_t N, int64_t K, uint64_t seed, double df = 4.0) const {
    Workload workload = *task.find_workload("llama3-8b-o-M19-N136");
    workload.axes = {{"M", M}, {"N", N}, {"K", K}};
    InputInit init;
    init.dist = "student_t";
    init.df = df;
    workload.inits["x"] = init;
    return make_inputs(task, *code, workload, seed);
  }
};

// The second draw keeps the first's weight (prepared inputs never change between draws) and draws only the
// activations (make_unprepared_inputs), which are the ones a whole fresh draw of its seed would give.
TEST_F(W4A16Gemm, TheSecondDrawKeepsTheWeightAndDrawsTheActivationsAFullDrawWould) {
  Workload workload = *task.find_workload("llama3-8b-o-M19-N136");
  workload.axes = {{"M", 7}, {"N", 64}, {"K", 256}};
  const TensorMap first = make_inputs(task, *code, workload, 11);
  const TensorMap second = make_second_inputs(task, *code, workload, first, 12);
  const TensorMap fresh = make_inputs(task, *code, workload, 12);
  EXPECT_TRUE(second.at("qweight").equal(first.at("qweight")));
  EXPECT_TRUE(second.at("scales").equal(first.at("scales")));
  EXPECT_FALSE(fresh.at("qweight").equal(first.at("qweight")));
  EXPECT_TRUE(second.at("x").equal(fresh.at("x")));
  EXPECT_FALSE(second.at("x").equal(first.at("x")));
}

// Codes [K, N] (0..15) unpacked by hand, independently of the reference's unpack.
at::Tensor unpack_by_hand(const at::Tensor& qweight) {
  const int64_t rows = qweight.size(0), N = qweight.size(1);
  at::Tensor codes = at::empty({rows * 8, N}, at::TensorOptions().dtype(at::kInt));
  auto q = qweight.accessor<int32_t, 2>();
  auto c = codes.accessor<int32_t, 2>();
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < 8; ++j) c[8 * i + j][n] = (static_cast<uint32_t>(q[i][n]) >> (4 * j)) & 15u;
  return codes;
}

TEST_F(W4A16Gemm, TheReferenceUnpacksAutoGptqWordsWithZeroPointEightAndScalesPerGroup) {
  // K 256 (two groups), N 2, M 2. Column 0's first word holds codes 0..7 (k = 0..7: w = -8..-1 times its
  // scale), column 1's holds 8..15 (w = 0..7; the word is negative as an int32). The rest of the first
  // group is code 8 (w = 0); the second group is code 9 everywhere (w = +1 times that group's scale).
  const auto i32 = at::TensorOptions().dtype(at::kInt);
  at::Tensor qweight = at::full({32, 2}, static_cast<int32_t>(0x88888888u), i32);
  qweight.narrow(0, 16, 16).fill_(static_cast<int32_t>(0x99999999u));
  qweight[0][0] = static_cast<int32_t>(0x76543210u);
  qweight[0][1] = static_cast<int32_t>(0xFEDCBA98u);
  const at::Tensor scales = at::tensor({0.5f, 0.25f, 3.0f, -2.0f}).view({2, 2}).to(at::kBFloat16);
  // Row 0: ones on k 0..7 and on k 128 (the second group's first value). Row 1: k + 1 on k 0..7, 0.5 on k 255.
  at::Tensor x = at::zeros({2, 256});
  x[0].narrow(0, 0, 8).fill_(1.0f);
  x[0][128] = 1.0f;
  x[1].narrow(0, 0, 8).copy_(at::arange(1, 9, at::TensorOptions().dtype(at::kFloat)));
  x[1][255] = 0.5f;
  TensorMap inputs{{"x", x.to(at::kBFloat16)}, {"qweight", qweight}, {"scales", scales}};
  const at::Tensor y = reference(inputs);
  ASSERT_EQ(y.scalar_type(), at::kBFloat16);
  const at::Tensor got = y.to(at::kFloat);
  EXPECT_EQ(got[0][0].item<float>(), -15.0f);  // 0.5 * (-8 - 7 - ... - 1) + 3 * 1
  EXPECT_EQ(got[0][1].item<float>(), 5.0f);    // 0.25 * (0 + 1 + ... + 7) - 2 * 1
  EXPECT_EQ(got[1][0].item<float>(), -58.5f);  // 0.5 * sum (k + 1)(k - 8) = -60, + 3 * 0.5
  EXPECT_EQ(got[1][1].item<float>(), 41.0f);   // 0.25 * sum (k + 1) k = 42, - 2 * 0.5
  EXPECT_EQ(oracle(inputs)[1][0].item<double>(), -58.5);
}

TEST_F(W4A16Gemm, InputsAreAutoGptqSymmetricQuantization) {
  const TensorMap inputs = workload_inputs(8, 48, 1024, 7);
  const at::Tensor codes = unpack_by_hand(inputs.at("qweight"));  // [K, N]
  EXPECT_TRUE(codes.ge(0).all().item<bool>() && codes.le(15).all().item<bool>());
  // scale = 2 * amax / 15: each group's largest weight lands on code 0 or 15 (|q - 8| of 7.5 rounded), so
  // every (group, channel) reaches |q - 8| >= 7, and the codes are spread (not all near 8).
  const at::Tensor centred = (codes - 8).abs().view({8, 128, 48});
  EXPECT_TRUE(centred.amax(1).ge(7).all().item<bool>());
  EXPECT_GT(centred.to(at::kFloat).mean().item<float>(), 1.5f);
  // The scales are positive and near 2 * 2.8 * 0.02 / 15 (the amax of 128 normals is about 2.8 std).
  const at::Tensor s = inputs.at("scales").to(at::kFloat);
  EXPECT_TRUE(s.gt(0).all().item<bool>());
  EXPECT_NEAR(s.mean().item<float>(), 2 * 2.8f * 0.02f / 15, 0.002f);
}

TEST_F(W4A16Gemm, TheToleranceAcceptsCorrectOrdersAndRejectsWrongZeroPoints) {
  for (const double df : {4.0, 2.0}) {
    const int64_t M = 1024, N = 512, K = df == 2.0 ? 14336 : 4096;
    const TensorMap inputs = workload_inputs(M, N, K, df == 2.0 ? 11 : 5, df);
    const at::Tensor x = inputs.at("x").to(at::kFloat);
    const at::Tensor codes = unpack_by_hand(inputs.at("qweight")).to(at::kFloat);  // [K, N]
    const at::Tensor s = inputs.at("scales").to(at::kFloat);                       // [K / 128, N]
    const at::Tensor s_full = s.repeat_interleave(128, 0);
    const auto gemm = [&](double zero) { return at::matmul(x, (codes - zero) * s_full); };
    // exllama's order: per-group fp32 partial sums of x * (q - 8), each times its scale.
    const at::Tensor partial = at::matmul(x.view({M, K / 128, 128}).transpose(0, 1), (codes - 8).view({K / 128, 128, N}));
    at::Tensor group_bf16 = at::zeros({M, N});
    for (int64_t g = 0; g < K / 128; ++g)
      group_bf16 = (group_bf16 + partial[g] * s[g]).to(at::kBFloat16).to(at::kFloat);
    std::map<std::string, std::pair<at::Tensor, bool>> variants = {
        {"the reference (bf16 weight, fp32 accumulation)", {reference(inputs), true}},
        {"fp32 weight, fp32 accumulation", {gemm(8).to(at::kBFloat16), true}},
        {"exllama's order (scale per group partial sum)", {(partial * s.unsqueeze(1)).sum(0).to(at::kBFloat16), true}},
        {"zero point 7 (GPTQ v1 off by one)", {gemm(7).to(at::kBFloat16), false}},
        {"zero point 0 (codes as unsigned)", {gemm(0).to(at::kBFloat16), false}},
        {"running sum rounded to bf16 after every group", {group_bf16.to(at::kBFloat16), false}},
        {"each group given its neighbour's scales",
         {at::matmul(x, (codes - 8) * s.roll(1, 0).repeat_interleave(128, 0)).to(at::kBFloat16), false}},
    };
    const at::Tensor want = oracle(inputs);
    for (const auto& [name, variant] : variants) {
      const auto verdict = check_against(want, variant.first);
      ASSERT_EQ(verdict.comparisons.size(), 1u);
      const auto& c = verdict.comparisons[0];
      std::cout << M << "x" << N << "x" << K << " df " << df << ", " << name << ": nmse " << c.nmse
                << ", worst excess " << c.worst_excess << "\n";
      EXPECT_EQ(verdict.status == Status::passed, variant.second) << name << ": " << verdict.message;
    }
  }
}

}  // namespace
}  // namespace d2k
