// Plain host solution of optim/muon_newton_schulz for the cpu device: the eager bf16 path, op by op. Each
// matrix of the batch is rounded to bf16, transposed when it has more rows than columns, divided by its
// Frobenius norm (+ 1e-7), then goes through five steps A = X X^T, B = b A + (c A) A, X = a X + B X, every
// product accumulated in fp32 and every result rounded to bf16 as eager PyTorch rounds it. Any strides.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "d2k/solution.h"

namespace {

constexpr float kA = 3.4445f, kB = -4.7750f, kC = 2.0315f;
constexpr float kEps = 1e-7f;
constexpr int kSteps = 5;

// Round to nearest, ties to even; NaN stays a (quiet) NaN.
uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float bf16_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

float round_bf16(float value) { return bf16_to_float(float_to_bf16(value)); }

int failed(const d2k_call* call, const char* message) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "optim/muon_newton_schulz (cpu): %s", message);
  return 1;
}

// out[i][j] = bf16(sum_k p[i][k] q[j][k]) for p [rows, K] and q [cols, K], both row-major: P Q^T.
void times_transpose(const std::vector<float>& p, const std::vector<float>& q, int64_t rows, int64_t cols, int64_t K,
                     std::vector<float>& out) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc += p[i * K + k] * q[j * K + k];
      out[i * cols + j] = round_bf16(acc);
    }
}

// out = bf16(P Q) for P [rows, K], Q [K, cols], row-major.
void times(const std::vector<float>& p, const std::vector<float>& q, int64_t rows, int64_t K, int64_t cols,
           std::vector<float>& out) {
  std::vector<float> acc(cols);
  for (int64_t i = 0; i < rows; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      const float w = p[i * K + k];
      for (int64_t j = 0; j < cols; ++j) acc[j] += w * q[k * cols + j];
    }
    for (int64_t j = 0; j < cols; ++j) out[i * cols + j] = round_bf16(acc[j]);
  }
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  if (call->num_inputs != 1 || call->num_outputs != 1) return failed(call, "expects the input g and the output x");
  const d2k_tensor& g = call->inputs[0];
  const d2k_tensor& x = call->outputs[0];
  if (g.dtype != D2K_FLOAT32 || x.dtype != D2K_BFLOAT16) return failed(call, "expects fp32 g and bf16 x");
  if (g.rank != 3 || x.rank != 3 || g.shape[0] != x.shape[0] || g.shape[1] != x.shape[1] || g.shape[2] != x.shape[2])
    return failed(call, "expects g and x of the same shape [B, R, C]");
  const int64_t batch = g.shape[0], R = g.shape[1], C = g.shape[2];
  const bool tall = R > C;
  const int64_t m = tall ? C : R, n = tall ? R : C;
  const auto* pg = static_cast<const float*>(g.data);
  auto* px = static_cast<uint16_t*>(x.data);

  std::vector<float> X(m * n), A(m * m), cA(m * m), AA(m * m), B(m * m), BX(m * n);
  for (int64_t b = 0; b < batch; ++b) {
    // X [m, n] = bf16(G), or bf16(G)^T.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t r = tall ? j : i, c = tall ? i : j;
        X[i * n + j] = round_bf16(pg[b * g.strides[0] + r * g.strides[1] + c * g.strides[2]]);
      }
    // The bf16 norm: accumulated wide, returned in bf16; + 1e-7 and the division each rounded to bf16.
    double squares = 0.0;
    for (float v : X) squares += static_cast<double>(v) * v;
    const float norm = round_bf16(round_bf16(static_cast<float>(std::sqrt(squares))) + kEps);
    for (float& v : X) v = round_bf16(v / norm);

    for (int step = 0; step < kSteps; ++step) {
      times_transpose(X, X, m, m, n, A);  // A = X X^T
      for (int64_t i = 0; i < m * m; ++i) cA[i] = round_bf16(kC * A[i]);
      times_transpose(cA, A, m, m, m, AA);  // (c A) A, with A = A^T
      for (int64_t i = 0; i < m * m; ++i) B[i] = round_bf16(round_bf16(kB * A[i]) + AA[i]);
      times(B, X, m, m, n, BX);
      for (int64_t i = 0; i < m * n; ++i) X[i] = round_bf16(round_bf16(kA * X[i]) + BX[i]);
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t r = tall ? j : i, c = tall ? i : j;
        px[b * x.strides[0] + r * x.strides[1] + c * x.strides[2]] = float_to_bf16(X[i * n + j]);
      }
  }
  return 0;
}
