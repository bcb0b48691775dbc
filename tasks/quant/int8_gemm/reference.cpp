// quant/int8_gemm: a w8a8 linear layer, written the way a model author writes it with PyTorch's int8
// matmul (torchao's int_scaled_matmul pattern): torch._int_mm for the exact int32 product, then the
// per-token and per-channel scales and the bias in fp32, one cast to bf16.
//
// The float64 oracle (scales and bias upcast by the harness; a and b stay int8) takes the product in
// float64, which is exact: every partial sum is an integer below 2^31, far inside float64's 2^53.
//
// make_inputs quantizes real-looking data: heavy-tailed activations with outlier channels, per token, and
// normal weights, per output channel, each to int8 with its true scale (amax / 127).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "reference/inputs.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

constexpr double kInt8Max = 127.0;     // symmetric quantization: codes in [-127, 127]
constexpr int64_t kOutlierEvery = 128;  // one activation channel in 128 is an outlier channel
constexpr double kOutlierGain = 20.0;   // ... this much larger than the others
constexpr double kTokenSpread = 0.5;    // log-normal spread of the tokens' magnitudes (std of the log)
constexpr int64_t kIntMmMinRows = 17;   // torch._int_mm on cuda: "self.size(0) needs to be greater than 16"
constexpr int64_t kOracleColumns = 8192;  // the float64 product in column blocks: a few GiB at most

// a [M, K] int8 times b [N, K] int8 transposed, exact, as int32 (native) or float64 (the oracle).
at::Tensor int8_product(const at::Tensor& a, const at::Tensor& b, bool oracle) {
  if (oracle) {
    at::Tensor out = at::empty({a.size(0), b.size(0)}, a.options().dtype(at::kDouble));
    const at::Tensor a64 = a.to(at::kDouble);
    for (int64_t n = 0; n < b.size(0); n += kOracleColumns) {
      const int64_t count = std::min(kOracleColumns, b.size(0) - n);
      out.narrow(1, n, count).copy_(at::matmul(a64, b.narrow(0, n, count).to(at::kDouble).t()));
    }
    return out;
  }
  // b.t() is the K-major [K, N] view nn.Linear's weight gives: the layout cuBLASLt's int8 kernels want.
  if (a.is_cuda() && a.size(0) < kIntMmMinRows) {
    // What torchao does for decode batches: pad with zero rows past the restriction, cut the result back.
    const at::Tensor padded = at::constant_pad_nd(a, {0, 0, 0, 32 - a.size(0)});
    return at::_int_mm(padded, b.t()).narrow(0, 0, a.size(0));
  }
  return at::_int_mm(a, b.t());
}

// x [rows, K] quantized per row to int8: (codes, scales) with scale = amax / 127 and code = round(x / scale),
// the float32 values of the tensor expression `scale = x.abs().amax(1).clamp_min(1e-12) / 127`, `codes =
// x.div(scale).round_().clamp_(-127, 127).to(int8)`, in one parallel pass per row (a row is read twice,
// from the cache the second time): as tensor expressions, a 470 M-value weight took five passes over
// memory and a temporary of its size, about half the draw's time.
std::pair<at::Tensor, at::Tensor> quantize_rows(const at::Tensor& x) {
  const int64_t rows = x.size(0), K = x.size(1);
  const at::Tensor values = x.contiguous();
  const float* in = values.data_ptr<float>();
  at::Tensor amax = at::empty({rows}, values.options());
  float* row_amax = amax.data_ptr<float>();
  at::parallel_for(0, rows, 16, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      float most = 0.0f;
      for (int64_t k = 0; k < K; ++k) most = std::max(most, std::fabs(in[r * K + k]));
      row_amax[r] = most;
    }
  });
  // The scales by the same tensor operations as ever (a [rows] tensor): their float32 rounding unchanged.
  const at::Tensor scale = amax.clamp_min(1e-12) / kInt8Max;
  const float* row_scale = scale.data_ptr<float>();
  at::Tensor codes = at::empty({rows, K}, values.options().dtype(at::kChar));
  int8_t* out = codes.data_ptr<int8_t>();
  const auto limit = static_cast<float>(kInt8Max);
  at::parallel_for(0, rows, 16, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r)
      for (int64_t k = 0; k < K; ++k)
        out[r * K + k] = static_cast<int8_t>(std::clamp(std::nearbyint(in[r * K + k] / row_scale[r]), -limit, limit));
  });
  return {codes, scale};
}

class Int8Gemm final : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars&) const override {
    const at::Tensor& a = inputs.at("a");
    const at::Tensor& b = inputs.at("b");
    const at::Tensor& s_a = inputs.at("s_a");
    const at::Tensor& s_b = inputs.at("s_b");
    const at::Tensor& bias = inputs.at("bias");
    const bool oracle = s_a.scalar_type() == at::kDouble;
    const auto wide = oracle ? at::kDouble : at::kFloat;
    const at::Tensor acc = int8_product(a, b, oracle);
    // The epilogue in fp32 (float64 for the oracle); one rounding to bf16 at the end (the harness rounds
    // the oracle's float64 itself).
    at::Tensor d = acc.to(wide) * s_a.unsqueeze(1) * s_b.unsqueeze(0) + bias.to(wide);
    return {{"d", oracle ? d : d.to(at::kBFloat16)}};
  }

  std::optional<TensorMap> make_inputs(const Task& task, const Workload& workload, at::Generator& gen) const override {
    const int64_t M = workload.axes.at("M"), N = workload.axes.at("N"), K = workload.axes.at("K");
    if (K % 16 != 0 || N % 8 != 0)
      fail("quant/int8_gemm: workload '{}': K = {} must be a multiple of 16 and N = {} of 8", workload.name, K, N);
    const auto i64 = at::TensorOptions().dtype(at::kLong);
    const auto seed = static_cast<uint64_t>(at::randint(0, int64_t{1} << 62, {1}, gen, i64).item<int64_t>());
    const auto f32 = at::TensorOptions().dtype(at::kFloat);

    // Activations: the workload's distribution, a random set of outlier channels shared by every token
    // (1 in kOutlierEvery, kOutlierGain larger), each token's magnitude log-normal.
    at::Tensor x = draw_input(init_of(*task.find_input("a"), workload), {M, K}, seed, 0, at::kFloat);
    const int64_t outliers = std::max<int64_t>(1, K / kOutlierEvery);
    at::Tensor gain = at::ones({K}, f32);
    gain.index_fill_(0, at::randperm(K, gen, i64).narrow(0, 0, outliers), kOutlierGain);
    const at::Tensor token = at::exp(at::normal(0.0, kTokenSpread, {M, 1}, gen, f32));
    auto [a, s_a] = quantize_rows(x.mul_(gain).mul_(token));

    // Weights: the workload's distribution, quantized per output channel.
    auto [b, s_b] = quantize_rows(draw_input(init_of(*task.find_input("b"), workload), {N, K}, seed, 1, at::kFloat));

    TensorMap inputs;
    inputs["a"] = a;
    inputs["b"] = b;
    inputs["s_a"] = s_a;
    inputs["s_b"] = s_b;
    inputs["bias"] = draw_input(init_of(*task.find_input("bias"), workload), {N}, seed, 2, at::kFloat).to(at::kBFloat16);
    return inputs;
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::Int8Gemm);
