// quant/w4a16_gemm: a GPTQ (4-bit, group 128, symmetric) linear layer, written the way a model author writes
// it without a fused kernel: unpack the nibbles, dequantize to bf16 with the zero point 8 and the group's
// scale, one bf16 matmul. The library path is the same cuBLAS matmul on a weight dequantized beforehand.
//
// The float64 oracle (x and scales upcast by the harness; qweight stays int32) runs the same code in
// float64: (q - 8) * scale is exact there, and the float64 matmul sums with an error far below fp32's.
//
// make_inputs quantizes a normal weight with AutoGPTQ's symmetric rule and packs it in AutoGPTQ's format.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <utility>

#include "reference/inputs.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

constexpr int64_t kGroup = 128;         // the scale group along K
constexpr int64_t kPack = 8;            // int4 codes per int32, along K
constexpr int64_t kZero = 8;            // the symmetric zero point
constexpr double kMaxQ = 15.0;          // codes 0..15
constexpr double kMinAmax = 1e-10;      // an all-zero group keeps a positive scale
constexpr int64_t kOutlierEvery = 128;  // one activation channel in 128 is an outlier channel
constexpr double kOutlierGain = 20.0;   // ... this much larger than the others
constexpr double kTokenSpread = 0.5;    // log-normal spread of the tokens' magnitudes (std of the log)

// qweight [K / 8, N] int32 -> codes [K, N] int32 in 0..15: k = 8i + j sits in bits 4j..4j+3 of row i.
at::Tensor unpack(const at::Tensor& qweight) {
  const at::Tensor shifts = at::arange(0, 32, 4, qweight.options()).view({1, kPack, 1});
  return at::bitwise_and(at::bitwise_right_shift(qweight.unsqueeze(1), shifts), 15)
      .reshape({qweight.size(0) * kPack, qweight.size(1)});
}

// w [K, N] = (q - 8) * scales[k / 128, n], in `dtype` (bf16 for the model author, float64 for the oracle).
at::Tensor dequantize(const at::Tensor& qweight, const at::Tensor& scales, at::ScalarType dtype) {
  return (unpack(qweight) - kZero).to(dtype) * scales.to(dtype).repeat_interleave(kGroup, 0);
}

// w [N, K] (nn.Linear's layout, contiguous) -> {qweight [K / 8, N] int32, scales [K / 128, N] bf16}: per
// 128-wide K group and output channel, scale = bf16(max(amax, 1e-10) * (2 / 15)) and
// q = clamp(round_half_even(w / scale) + 8, 0, 15) in float, as the tensor expression
// `(grouped.abs().amax(1).clamp_min(1e-10) * (2.0 / 15)).to(bf16)`, `grouped.div(scale).round_().add_(8)
// .clamp_(0, 15)` computes it; code k = 8i + j packed into bits 4j..4j+3 of word i (AutoGPTQ's pack; the
// top nibble wraps into the sign). One pass per output channel, in parallel: the 70B layers' weights
// (235 M values) were seconds of int64 temporaries as tensor expressions.
std::pair<at::Tensor, at::Tensor> quantize(const at::Tensor& w) {
  const int64_t N = w.size(0), K = w.size(1), groups = K / kGroup;
  at::Tensor qweight = at::empty({K / kPack, N}, at::TensorOptions().dtype(at::kInt));
  at::Tensor scales = at::empty({groups, N}, at::TensorOptions().dtype(at::kBFloat16));
  const float* weights = w.data_ptr<float>();
  int32_t* words = qweight.data_ptr<int32_t>();
  at::BFloat16* scale_out = scales.data_ptr<at::BFloat16>();
  const float min_amax = static_cast<float>(kMinAmax), step = static_cast<float>(2.0 / kMaxQ);
  at::parallel_for(0, N, 16, [&](int64_t first, int64_t last) {
    for (int64_t n = first; n < last; ++n) {
      for (int64_t g = 0; g < groups; ++g) {
        const float* group = weights + n * K + g * kGroup;
        float amax = 0.0f;
        for (int64_t k = 0; k < kGroup; ++k) amax = std::max(amax, std::fabs(group[k]));
        const at::BFloat16 scale(std::max(amax, min_amax) * step);
        scale_out[g * N + n] = scale;
        const float divisor = static_cast<float>(scale);
        for (int64_t i = 0; i < kGroup / kPack; ++i) {
          uint32_t word = 0;
          for (int64_t j = 0; j < kPack; ++j) {
            const float q = std::clamp(std::nearbyint(group[i * kPack + j] / divisor) + static_cast<float>(kZero), 0.0f,
                                       static_cast<float>(kMaxQ));
            word |= static_cast<uint32_t>(q) << (4 * j);
          }
          words[(g * (kGroup / kPack) + i) * N + n] = static_cast<int32_t>(word);
        }
      }
    }
  });
  return {std::move(qweight), std::move(scales)};
}

class W4A16Gemm final : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars&) const override {
    const at::Tensor& x = inputs.at("x");
    const bool oracle = x.scalar_type() == at::kDouble;
    const at::Tensor w = dequantize(inputs.at("qweight"), inputs.at("scales"), oracle ? at::kDouble : at::kBFloat16);
    return {{"y", at::matmul(x, w)}};
  }

  bool has_library() const override { return true; }

  // cuBLAS bf16 on a weight dequantized once (library_setup, outside the timed calls), as a serving
  // system without an int4 kernel keeps it; dequantized here where the caller did not set it up.
  TensorMap library_setup(const TensorMap& inputs, const Scalars&) const override {
    return {{kDequantized, dequantize(inputs.at("qweight"), inputs.at("scales"), at::kBFloat16)}};
  }

  TensorMap library(TensorMap& inputs, const Scalars&) const override {
    const at::Tensor& x = inputs.at("x");
    if (x.scalar_type() == at::kDouble)
      return {{"y", at::matmul(x, dequantize(inputs.at("qweight"), inputs.at("scales"), at::kDouble))}};
    const auto set_up = inputs.find(kDequantized);
    const at::Tensor w = set_up != inputs.end() ? set_up->second
                                                : dequantize(inputs.at("qweight"), inputs.at("scales"), at::kBFloat16);
    return {{"y", at::matmul(x, w)}};
  }

  std::optional<TensorMap> make_inputs(const Task& task, const Workload& workload, at::Generator& gen) const override {
    const int64_t N = workload.axes.at("N"), K = workload.axes.at("K");
    uint64_t seed = 0;
    TensorMap inputs{{"x", activations(task, workload, gen, seed)}};
    // Weight [K, N] (the transpose of nn.Linear's, as GPTQ stores it), quantized per 128-wide K group and
    // output channel: scale = 2 * amax / 15 (rounded to bf16, as stored), q = clamp(round(w / s) + 8, 0, 15).
    const at::Tensor w = draw_input(init_of(*task.find_input("qweight"), workload), {N, K}, seed, 1, at::kFloat);
    std::tie(inputs["qweight"], inputs["scales"]) = quantize(w);
    return inputs;
  }

  // The second draw's activations alone: its weight is the first draw's (a prepared input), and drawing a
  // 70B layer's weight again only to replace it was half of the task's input time.
  std::optional<TensorMap> make_unprepared_inputs(const Task& task, const Workload& workload,
                                                  at::Generator& gen) const override {
    uint64_t seed = 0;
    return TensorMap{{"x", activations(task, workload, gen, seed)}};
  }

 private:
  // The activations x [M, K] bf16: the workload's distribution, a random set of outlier channels shared by
  // every token, each token's magnitude log-normal. First draws `seed`, the seed of the chunked draws
  // (x is its input 0, the weight its input 1), so that both draws above get the same x from `gen`.
  static at::Tensor activations(const Task& task, const Workload& workload, at::Generator& gen, uint64_t& seed) {
    const int64_t M = workload.axes.at("M"), N = workload.axes.at("N"), K = workload.axes.at("K");
    if (K % kGroup != 0 || N % 8 != 0)
      fail("quant/w4a16_gemm: workload '{}': K = {} must be a multiple of 128 and N = {} of 8", workload.name, K, N);
    const auto i64 = at::TensorOptions().dtype(at::kLong);
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    seed = static_cast<uint64_t>(at::randint(0, int64_t{1} << 62, {1}, gen, i64).item<int64_t>());
    at::Tensor x = draw_input(init_of(*task.find_input("x"), workload), {M, K}, seed, 0, at::kFloat);
    const int64_t outliers = std::max<int64_t>(1, K / kOutlierEvery);
    at::Tensor gain = at::ones({K}, f32);
    gain.index_fill_(0, at::randperm(K, gen, i64).narrow(0, 0, outliers), kOutlierGain);
    const at::Tensor token = at::exp(at::normal(0.0, kTokenSpread, {M, 1}, gen, f32));
    return x.mul_(gain).mul_(token).to(at::kBFloat16);
  }

  // The library path's setup, by a name no input of the task has.
  static constexpr const char* kDequantized = "library: weight dequantized to bf16";
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::W4A16Gemm);
