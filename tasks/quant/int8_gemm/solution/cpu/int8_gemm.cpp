// Plain host solution of quant/int8_gemm for the cpu device: per output element the exact int32 dot
// product of a row of a and a row of b (both K-major), then the task's fp32 epilogue in its order,
// s_a * (s_b * acc) + bias, rounded once to bf16. Any strides.
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

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
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "int8_gemm (cpu): %s", message);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* a = find(call->inputs, call->num_inputs, "a");
  const d2k_tensor* b = find(call->inputs, call->num_inputs, "b");
  const d2k_tensor* s_a = find(call->inputs, call->num_inputs, "s_a");
  const d2k_tensor* s_b = find(call->inputs, call->num_inputs, "s_b");
  const d2k_tensor* bias = find(call->inputs, call->num_inputs, "bias");
  const d2k_tensor* d = find(call->outputs, call->num_outputs, "d");
  if (!a || !b || !s_a || !s_b || !bias || !d) return failed(call, "missing one of the inputs a, b, s_a, s_b, bias or the output d");
  if (a->dtype != D2K_INT8 || b->dtype != D2K_INT8 || s_a->dtype != D2K_FLOAT32 || s_b->dtype != D2K_FLOAT32 ||
      bias->dtype != D2K_BFLOAT16 || d->dtype != D2K_BFLOAT16)
    return failed(call, "expects int8 a and b, fp32 s_a and s_b, bf16 bias and d");
  const int64_t M = a->shape[0], K = a->shape[1], N = b->shape[0];
  if (b->shape[1] != K || s_a->shape[0] != M || s_b->shape[0] != N || bias->shape[0] != N || d->shape[0] != M ||
      d->shape[1] != N)
    return failed(call, "shapes disagree: expects a [M, K], b [N, K], s_a [M], s_b [N], bias [N], d [M, N]");

  const auto* pa = static_cast<const int8_t*>(a->data);
  const auto* pb = static_cast<const int8_t*>(b->data);
  const auto* psa = static_cast<const float*>(s_a->data);
  const auto* psb = static_cast<const float*>(s_b->data);
  const auto* pbias = static_cast<const uint16_t*>(bias->data);
  auto* pd = static_cast<uint16_t*>(d->data);
  for (int64_t m = 0; m < M; ++m) {
    const int8_t* row = pa + m * a->strides[0];
    const float scale_a = psa[m * s_a->strides[0]];
    for (int64_t n = 0; n < N; ++n) {
      const int8_t* col = pb + n * b->strides[0];
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += int32_t{row[k * a->strides[1]]} * int32_t{col[k * b->strides[1]]};
      const float t = psb[n * s_b->strides[0]] * static_cast<float>(acc);
      pd[m * d->strides[0] + n * d->strides[1]] = float_to_bf16(scale_a * t + bf16_to_float(pbias[n * bias->strides[0]]));
    }
  }
  return 0;
}
