// quant/fp8_block_gemm: DeepSeek-V3's blockwise fp8 linear layer, written the way a model author without a
// block-scaled GEMM kernel writes it (DeepSeek's weight_dequant, then F.linear): both operands dequantized to
// bf16 with their block scales, then one bf16 matmul. The library path is torch._scaled_mm with the
// 1x128 / 128x128 block scales that cuBLASLt takes on sm_90.
//
// The float64 oracle (every floating input upcast by the harness, fp8 codes included) runs the same code
// without the bf16 casts: a product of an e4m3 code (4 significant bits) and an fp32 scale (24) is exact in
// float64, so the dequantized operands are exact, and the float64 matmul sums them with an error far below
// an fp32 rounding. That is the task's per-block sum scaled per block, exactly.
//
// make_inputs quantizes real-looking data the way DeepSeek-V3's act_quant and weight_quant do.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "reference/inputs.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

constexpr int64_t kBlock = 128;           // the scale block along K (and along N for the weight)
constexpr double kFp8Max = 448.0;         // largest finite OCP e4m3fn value
constexpr double kMinAmax = 1e-10;        // an all-zero block keeps a positive scale
constexpr int64_t kOutlierEvery = 128;    // one activation channel in 128 is an outlier channel
constexpr double kOutlierGain = 20.0;     // ... this much larger than the others
constexpr double kTokenSpread = 0.5;      // log-normal spread of the tokens' magnitudes (std of the log)
constexpr double kWeightBlockSpread = 0.5;  // log-normal spread of the weight blocks' magnitudes

// sa [M, KB] repeated over each 128-wide K block: [M, K].
at::Tensor expand_activation_scales(const at::Tensor& sa) { return sa.repeat_interleave(kBlock, 1); }

// sb [ceil(N / 128), KB] repeated over each 128 x 128 block and cut to N rows: [N, K].
at::Tensor expand_weight_scales(const at::Tensor& sb, int64_t N) {
  return sb.repeat_interleave(kBlock, 0).narrow(0, 0, N).repeat_interleave(kBlock, 1);
}

// x [rows, K] quantized to e4m3 with one scale per `block_rows` x 128 block (amax / 448, round to nearest
// even, saturated): (codes [rows, K], scales [ceil(rows / block_rows), K / 128]). Rows past the end pad
// the last block with zeros. In place on x where it can.
std::pair<at::Tensor, at::Tensor> quantize_blocks(at::Tensor x, int64_t block_rows) {
  const int64_t rows = x.size(0), K = x.size(1), RB = (rows + block_rows - 1) / block_rows, KB = K / kBlock;
  const at::Tensor padded = rows % block_rows == 0 ? x : at::constant_pad_nd(x, {0, 0, 0, RB * block_rows - rows});
  const at::Tensor scale =
      padded.view({RB, block_rows, KB, kBlock}).abs().amax({1, 3}).clamp_min(kMinAmax) / kFp8Max;  // [RB, KB]
  const at::Tensor full = scale.repeat_interleave(block_rows, 0).narrow(0, 0, rows).repeat_interleave(kBlock, 1);
  const at::Tensor codes = x.div_(full).clamp_(-kFp8Max, kFp8Max).to(at::kFloat8_e4m3fn);
  return {codes, scale.contiguous()};
}

class Fp8BlockGemm final : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars&) const override {
    const at::Tensor& a = inputs.at("a");
    const at::Tensor& sa = inputs.at("sa");
    const at::Tensor& b = inputs.at("b");
    const at::Tensor& sb = inputs.at("sb");
    const bool oracle = sa.scalar_type() == at::kDouble;
    const auto wide = oracle ? at::kDouble : at::kFloat;
    // Dequantize: code times its block's scale, in fp32 (float64 for the oracle, where it is exact).
    at::Tensor a_deq = a.to(wide) * expand_activation_scales(sa.to(wide));
    at::Tensor b_deq = b.to(wide) * expand_weight_scales(sb.to(wide), b.size(0));
    if (oracle) return {{"c", at::matmul(a_deq, b_deq.t())}};
    // The model author's bf16 weights and activations, one bf16 matmul (fp32 accumulation in cuBLAS).
    return {{"c", at::matmul(a_deq.to(at::kBFloat16), b_deq.to(at::kBFloat16).t())}};
  }

  bool has_library() const override { return true; }

  // torch._scaled_mm with PyTorch's DeepSeek recipe: a [M, K] row-major with scale_a [M, KB] outer-dim-major
  // (stride (1, M) exactly: BlockWise1x128), b.t() [K, N] column-major with scale_b = sb.t() (sb row-major:
  // BlockWise128x128). Our sa pads its columns to align(M, 4); where M % 4 != 0 the scales are copied to
  // the unpadded layout first (M * KB floats, a few KB). The cpu device has no block-scaled _scaled_mm:
  // there the library path is the eager one (the cpu device is a test seam, not a benchmark).
  TensorMap library(TensorMap& inputs, const Scalars& scalars) const override {
    const at::Tensor& a = inputs.at("a");
    if (!a.is_cuda()) return reference(inputs, scalars);
    const at::Tensor& sa = inputs.at("sa");
    const at::Tensor scale_a = sa.stride(1) == sa.size(0) ? sa : sa.t().contiguous().t();
    return {{"c", at::_scaled_mm(a, inputs.at("b").t(), scale_a, inputs.at("sb").t(), std::nullopt, std::nullopt,
                                 at::kBFloat16, /*use_fast_accum=*/false)}};
  }

  std::optional<TensorMap> make_inputs(const Task& task, const Workload& workload, at::Generator& gen) const override {
    const int64_t M = workload.axes.at("M"), N = workload.axes.at("N"), K = workload.axes.at("K");
    if (K % kBlock != 0 || N % 16 != 0)
      fail("quant/fp8_block_gemm: workload '{}': K = {} must be a multiple of 128 and N = {} of 16", workload.name, K,
           N);
    const auto i64 = at::TensorOptions().dtype(at::kLong);
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    const auto seed = static_cast<uint64_t>(at::randint(0, int64_t{1} << 62, {1}, gen, i64).item<int64_t>());

    // Activations: the workload's distribution, a random set of outlier channels shared by every token,
    // each token's magnitude log-normal; quantized per token and 128-wide K block (act_quant).
    at::Tensor x = draw_input(init_of(*task.find_input("a"), workload), {M, K}, seed, 0, at::kFloat);
    const int64_t outliers = std::max<int64_t>(1, K / kOutlierEvery);
    at::Tensor gain = at::ones({K}, f32);
    gain.index_fill_(0, at::randperm(K, gen, i64).narrow(0, 0, outliers), kOutlierGain);
    const at::Tensor token = at::exp(at::normal(0.0, kTokenSpread, {M, 1}, gen, f32));
    auto [a, sa] = quantize_blocks(x.mul_(gain).mul_(token), 1);

    // Weights: the workload's distribution, each 128 x 128 block's magnitude log-normal, quantized per
    // block (weight_quant).
    const int64_t NB = (N + kBlock - 1) / kBlock, KB = K / kBlock;
    at::Tensor w = draw_input(init_of(*task.find_input("b"), workload), {N, K}, seed, 1, at::kFloat);
    const at::Tensor block = at::exp(at::normal(0.0, kWeightBlockSpread, {NB, KB}, gen, f32));
    w.mul_(expand_weight_scales(block, N));
    auto [b, sb] = quantize_blocks(std::move(w), kBlock);

    return TensorMap{{"a", a}, {"sa", sa}, {"b", b}, {"sb", sb}};
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::Fp8BlockGemm);
