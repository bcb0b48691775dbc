// optim/muon_newton_schulz: the orthogonalization of Muon's update, written the way Keller Jordan's Muon
// (muon.py, zeropower_via_newtonschulz5) writes it in eager PyTorch: cast to bf16, transpose so that rows <=
// cols, divide by the Frobenius norm (+ 1e-7) of each matrix, then five quintic Newton-Schulz steps, each
// three bf16 matmuls (cuBLAS, fp32 accumulation) and bf16 elementwise ops, and the transpose back.
//
// The float64 oracle (the input upcast by the harness) rounds the input to bf16 exactly as the eager path
// does (X = G.bfloat16() is the operator's first step: it runs on that matrix), then computes everything
// after it in float64: the normalization and the five steps without any rounding.
//
// make_inputs draws a gradient-like update: a low-rank part (what a linear layer's gradient is mostly made
// of) plus noise, with log-normal row and column scales.
#include <ATen/ATen.h>

#include <cmath>

#include "reference/inputs.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

constexpr double kA = 3.4445;   // the quintic's coefficients, Muon's (3.4445, -4.7750, 2.0315)
constexpr double kB = -4.7750;
constexpr double kC = 2.0315;
constexpr double kEps = 1e-7;   // added to the norm
constexpr int kSteps = 5;

constexpr int64_t kRank = 8;             // the rank of the gradient's low-rank part
constexpr double kLowRankShare = 0.5;    // ... and its share of the energy (the noise holds the rest)
constexpr double kScaleSpread = 0.5;     // log-normal spread of the row and of the column scales

class MuonNewtonSchulz final : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars&) const override {
    const at::Tensor& g = inputs.at("g");
    const bool oracle = g.scalar_type() == at::kDouble;
    at::Tensor X = g.to(at::kBFloat16);
    if (oracle) X = X.to(at::kDouble);  // the bf16 matrix, exactly, in float64
    const bool tall = g.size(-2) > g.size(-1);
    if (tall) X = X.mT();
    // X.norm(dim=(-2, -1), keepdim=True): in bf16 it accumulates in fp32 and returns bf16; + 1e-7 and the
    // division each round to bf16.
    X = X / (X.norm(2, {-2, -1}, /*keepdim=*/true) + kEps);
    for (int step = 0; step < kSteps; ++step) {
      const at::Tensor A = at::matmul(X, X.mT());
      // Python's `b * A + c * A @ A`: * and @ bind alike, left to right, so it is (b A) + ((c A) @ A).
      const at::Tensor B = kB * A + at::matmul(kC * A, A);
      X = kA * X + at::matmul(B, X);
    }
    if (tall) X = X.mT();
    return {{"x", X}};
  }

  std::optional<TensorMap> make_inputs(const Task& task, const Workload& workload, at::Generator& gen) const override {
    const int64_t B = workload.axes.at("B"), R = workload.axes.at("R"), C = workload.axes.at("C");
    const auto i64 = at::TensorOptions().dtype(at::kLong);
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    const auto seed = static_cast<uint64_t>(at::randint(0, int64_t{1} << 62, {1}, gen, i64).item<int64_t>());
    // The noise: the workload's distribution (its std is the update's scale).
    const InputInit& init = init_of(*task.find_input("g"), workload);
    at::Tensor g = draw_input(init, {B, R, C}, seed, 0, at::kFloat);
    const at::Tensor noise_rms = g.square().mean({-2, -1}, /*keepdim=*/true).sqrt();
    // The low-rank part: P Q with P [B, R, k], Q [B, k, C] standard normal; its elements have variance k.
    const int64_t k = std::min<int64_t>(kRank, std::min(R, C));
    const at::Tensor low = at::matmul(at::randn({B, R, k}, gen, f32), at::randn({B, k, C}, gen, f32));
    const double share = std::sqrt(kLowRankShare / (1.0 - kLowRankShare));
    g = g.add_(low.mul_(noise_rms * (share / std::sqrt(static_cast<double>(k)))));
    // Rows (output channels) and columns (input channels) of a layer's gradient differ in scale.
    g.mul_(at::exp(at::normal(0.0, kScaleSpread, {B, R, 1}, gen, f32)));
    g.mul_(at::exp(at::normal(0.0, kScaleSpread, {B, 1, C}, gen, f32)));
    return TensorMap{{"g", g}};
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::MuonNewtonSchulz);
