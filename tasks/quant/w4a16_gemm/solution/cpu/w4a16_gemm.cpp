// Plain host solution of quant/w4a16_gemm for the cpu device: the weight is dequantized once per call into
// fp32 (exact: a 4-bit integer times a bf16 scale), then per output element an fp32 dot product of a row of
// x with a column of w, rounded once to bf16. qweight is AutoGPTQ's [K / 8, N] int32 with k = 8i + j in
// bits 4j .. 4j + 3 of row i; the zero point is 8. Any strides.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "d2k/solution.h"

namespace {

constexpr int64_t kGroup = 128;

float bf16_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// Round to nearest, ties to even; NaN stays a (quiet) NaN.
uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

int failed(const d2k_call* call, const char* message) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "w4a16_gemm (cpu): %s", message);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* x = find(call->inputs, call->num_inputs, "x");
  const d2k_tensor* qweight = find(call->inputs, call->num_inputs, "qweight");
  const d2k_tensor* scales = find(call->inputs, call->num_inputs, "scales");
  const d2k_tensor* y = find(call->outputs, call->num_outputs, "y");
  if (!x || !qweight || !scales || !y) return failed(call, "missing one of the inputs x, qweight, scales or the output y");
  if (x->dtype != D2K_BFLOAT16 || qweight->dtype != D2K_INT32 || scales->dtype != D2K_BFLOAT16 ||
      y->dtype != D2K_BFLOAT16)
    return failed(call, "expects bf16 x, int32 qweight, bf16 scales and bf16 y");
  const int64_t M = x->shape[0], K = x->shape[1], N = qweight->shape[1];
  if (K % kGroup != 0 || qweight->shape[0] != K / 8 || scales->shape[0] != K / kGroup || scales->shape[1] != N ||
      y->shape[0] != M || y->shape[1] != N)
    return failed(call, "shapes disagree: expects x [M, K] (K a multiple of 128), qweight [K/8, N], scales [K/128, N], y [M, N]");

  const auto* px = static_cast<const uint16_t*>(x->data);
  const auto* pq = static_cast<const int32_t*>(qweight->data);
  const auto* ps = static_cast<const uint16_t*>(scales->data);
  auto* py = static_cast<uint16_t*>(y->data);
  // w transposed to [N, K] so that the dot products run along contiguous memory.
  std::vector<float> w(static_cast<size_t>(N * K));
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t n = 0; n < N; ++n) {
      const auto word = static_cast<uint32_t>(pq[(k / 8) * qweight->strides[0] + n * qweight->strides[1]]);
      const int code = static_cast<int>((word >> (4 * (k % 8))) & 15u) - 8;
      w[n * K + k] = static_cast<float>(code) * bf16_to_float(ps[(k / kGroup) * scales->strides[0] + n * scales->strides[1]]);
    }
  }
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) row[k] = bf16_to_float(px[m * x->strides[0] + k * x->strides[1]]);
    for (int64_t n = 0; n < N; ++n) {
      const float* col = w.data() + n * K;
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc += row[k] * col[k];
      py[m * y->strides[0] + n * y->strides[1]] = float_to_bf16(acc);
    }
  }
  return 0;
}
