// Plain host solution of pos/rope_neox for the cpu device: one token at a time, its table row read at its
// position, each pair (i, i + D/2) of every head rotated in fp32 and rounded once to bf16 (the task's
// definition), any token and head strides.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>

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

int failed(const d2k_call* call, const char* message, const char* name) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "rope_neox (cpu): %s '%s'", message, name);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

// Rotates every head of one token of x in place with the row's cos (first half) and sin (second half).
void rotate_token(const d2k_tensor& x, int64_t t, const uint16_t* row, int64_t row_stride) {
  auto* data = static_cast<uint16_t*>(x.data);
  const int64_t half = x.shape[2] / 2;
  for (int64_t h = 0; h < x.shape[1]; ++h) {
    uint16_t* head = data + t * x.strides[0] + h * x.strides[1];
    for (int64_t i = 0; i < half; ++i) {
      const float c = bf16_to_float(row[i * row_stride]), s = bf16_to_float(row[(half + i) * row_stride]);
      const float a = bf16_to_float(head[i * x.strides[2]]), b = bf16_to_float(head[(half + i) * x.strides[2]]);
      head[i * x.strides[2]] = float_to_bf16(a * c - b * s);
      head[(half + i) * x.strides[2]] = float_to_bf16(b * c + a * s);
    }
  }
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* positions = find(call->inputs, call->num_inputs, "positions");
  const d2k_tensor* cache = find(call->inputs, call->num_inputs, "cos_sin_cache");
  const d2k_tensor* q = find(call->outputs, call->num_outputs, "q");
  const d2k_tensor* k = find(call->outputs, call->num_outputs, "k");
  if (!positions) return failed(call, "missing input", "positions");
  if (!cache) return failed(call, "missing input", "cos_sin_cache");
  if (!q) return failed(call, "missing output", "q");
  if (!k) return failed(call, "missing output", "k");
  if (positions->dtype != D2K_INT64 || positions->rank != 1) return failed(call, "expects a rank-1 int64 tensor", "positions");
  if (cache->dtype != D2K_BFLOAT16 || cache->rank != 2) return failed(call, "expects a rank-2 bf16 tensor", "cos_sin_cache");
  for (const d2k_tensor* x : {q, k}) {
    if (x->dtype != D2K_BFLOAT16 || x->rank != 3) return failed(call, "expects a rank-3 bf16 tensor", x->name);
    if (x->shape[0] != positions->shape[0] || x->shape[2] != cache->shape[1] || x->shape[2] % 2 != 0)
      return failed(call, "expects [T, heads, D] with D the table's (even) width for", x->name);
  }

  const auto* pos = static_cast<const int64_t*>(positions->data);
  const auto* table = static_cast<const uint16_t*>(cache->data);
  for (int64_t t = 0; t < positions->shape[0]; ++t) {
    const int64_t p = pos[t * positions->strides[0]];
    if (p < 0 || p >= cache->shape[0]) return failed(call, "a position lies outside the table", "positions");
    const uint16_t* row = table + p * cache->strides[0];
    rotate_token(*q, t, row, cache->strides[1]);
    rotate_token(*k, t, row, cache->strides[1]);
  }
  return 0;
}
