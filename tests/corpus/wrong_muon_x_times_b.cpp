// A hurried implementer's mistake (issue 14), not a cheat: optim/muon_newton_schulz with the Newton-Schulz
// step's last product in the wrong order, X' = a X + X B instead of a X + B X. Everything else is the
// eager bf16 path. For a square matrix both products exist, and X B = X p(X X^T) is not p(X X^T) X unless X
// commutes with X^T (a normal matrix, which a gradient is not): the iteration leaves the quintic's
// fixed region and diverges. incorrect_numerics, "'x'", on a square smoke workload.

#include <cmath>
#include <vector>

#include "bf16_bits.h"
#include "d2k/solution.h"

namespace {

float bf16(float value) { return bf16_to_float(round_to_bf16(value)); }

// out = bf16(P Q) for row-major P [rows, K] and Q [K, cols].
std::vector<float> times(const std::vector<float>& p, const std::vector<float>& q, int64_t rows, int64_t K, int64_t cols) {
  std::vector<float> out(rows * cols, 0.0f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < cols; ++j) out[i * cols + j] += p[i * K + k] * q[k * cols + j];
  for (float& v : out) v = bf16(v);
  return out;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& g = call->inputs[0];
  const int64_t batch = g.shape[0], R = g.shape[1], C = g.shape[2];
  const bool tall = R > C;
  const int64_t m = tall ? C : R, n = tall ? R : C;
  const auto* pg = static_cast<const float*>(g.data);
  auto* px = static_cast<uint16_t*>(call->outputs[0].data);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<float> X(m * n), Xt(n * m);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) X[i * n + j] = bf16(pg[b * R * C + (tall ? j * C + i : i * C + j)]);
    double squares = 0.0;
    for (float v : X) squares += static_cast<double>(v) * v;
    const float norm = bf16(bf16(static_cast<float>(std::sqrt(squares))) + 1e-7f);
    for (float& v : X) v = bf16(v / norm);
    for (int step = 0; step < 5; ++step) {
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) Xt[j * m + i] = X[i * n + j];
      const std::vector<float> A = times(X, Xt, m, n, m);
      std::vector<float> cA(m * m), B(m * m);
      for (int64_t i = 0; i < m * m; ++i) cA[i] = bf16(2.0315f * A[i]);
      const std::vector<float> AA = times(cA, A, m, m, m);
      for (int64_t i = 0; i < m * m; ++i) B[i] = bf16(bf16(-4.7750f * A[i]) + AA[i]);
      // The mistake: X B ([m, n] times [m, m], defined only when m == n) where the step needs B X.
      const std::vector<float> XB = m == n ? times(X, B, m, m, n) : times(B, X, m, m, n);
      for (int64_t i = 0; i < m * n; ++i) X[i] = bf16(bf16(3.4445f * X[i]) + XB[i]);
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) px[b * R * C + (tall ? j * C + i : i * C + j)] = round_to_bf16(X[i * n + j]);
  }
  return 0;
}
