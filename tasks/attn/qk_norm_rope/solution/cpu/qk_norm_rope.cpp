// Plain host solution of attn/qk_norm_rope for the cpu device: one head at a time, the rounding points of
// the task's description (the normalized value rounded to bf16, then times the weight, rounded; the
// rotation in fp32, rounded once), any row stride; v is never touched.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

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

float round_bf16(float value) { return bf16_to_float(float_to_bf16(value)); }

int failed(const d2k_call* call, const char* message, const char* name) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "qk_norm_rope (cpu): %s '%s'", message, name);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

const d2k_scalar* find_scalar(const d2k_call* call, const char* name) {
  for (int32_t i = 0; i < call->num_scalars; ++i)
    if (call->scalars[i].name && std::strcmp(call->scalars[i].name, name) == 0) return &call->scalars[i];
  return nullptr;
}

// Normalizes and rotates one head of `size` values at `head` (element stride `step`) in place.
void norm_rope_head(uint16_t* head, int64_t step, int64_t size, const d2k_tensor& weight, const uint16_t* row,
                    int64_t row_step, float eps, std::vector<float>& n) {
  const auto* w = static_cast<const uint16_t*>(weight.data);
  float sum = 0.0f;
  for (int64_t j = 0; j < size; ++j) {
    const float x = bf16_to_float(head[j * step]);
    sum += x * x;
  }
  const float inv = 1.0f / std::sqrt(sum / static_cast<float>(size) + eps);
  for (int64_t j = 0; j < size; ++j)
    n[j] = round_bf16(round_bf16(bf16_to_float(head[j * step]) * inv) * bf16_to_float(w[j * weight.strides[0]]));
  const int64_t half = size / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float c = bf16_to_float(row[i * row_step]), s = bf16_to_float(row[(half + i) * row_step]);
    head[i * step] = float_to_bf16(n[i] * c - n[half + i] * s);
    head[(half + i) * step] = float_to_bf16(n[half + i] * c + n[i] * s);
  }
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* q_weight = find(call->inputs, call->num_inputs, "q_weight");
  const d2k_tensor* k_weight = find(call->inputs, call->num_inputs, "k_weight");
  const d2k_tensor* positions = find(call->inputs, call->num_inputs, "positions");
  const d2k_tensor* cache = find(call->inputs, call->num_inputs, "cos_sin_cache");
  const d2k_tensor* qkv = find(call->outputs, call->num_outputs, "qkv");
  const d2k_scalar* eps = find_scalar(call, "eps");
  const d2k_scalar* heads_q = find_scalar(call, "num_heads_q");
  const d2k_scalar* heads_kv = find_scalar(call, "num_heads_kv");
  if (!q_weight || !k_weight || !positions || !cache) return failed(call, "missing an input among", "q_weight, k_weight, positions, cos_sin_cache");
  if (!qkv) return failed(call, "missing output", "qkv");
  if (!eps || !heads_q || !heads_kv) return failed(call, "missing a scalar among", "eps, num_heads_q, num_heads_kv");
  if (qkv->dtype != D2K_BFLOAT16 || qkv->rank != 2) return failed(call, "expects a rank-2 bf16 tensor", "qkv");
  if (positions->dtype != D2K_INT64 || positions->rank != 1 || positions->shape[0] != qkv->shape[0])
    return failed(call, "expects int64 [T] for", "positions");
  if (cache->dtype != D2K_BFLOAT16 || cache->rank != 2) return failed(call, "expects a rank-2 bf16 tensor", "cos_sin_cache");
  const int64_t size = cache->shape[1];
  if (q_weight->shape[0] != size || k_weight->shape[0] != size || size % 2 != 0)
    return failed(call, "expects weights of the table's (even) width for", "q_weight, k_weight");
  const int64_t hq = heads_q->i, hkv = heads_kv->i;
  if ((hq + 2 * hkv) * size != qkv->shape[1]) return failed(call, "expects rows of (Hq + 2 Hkv) D values in", "qkv");

  auto* data = static_cast<uint16_t*>(qkv->data);
  const auto* pos = static_cast<const int64_t*>(positions->data);
  const auto* table = static_cast<const uint16_t*>(cache->data);
  std::vector<float> n(static_cast<std::size_t>(size));
  for (int64_t t = 0; t < qkv->shape[0]; ++t) {
    const int64_t p = pos[t * positions->strides[0]];
    if (p < 0 || p >= cache->shape[0]) return failed(call, "a position lies outside the table", "positions");
    const uint16_t* row = table + p * cache->strides[0];
    uint16_t* token = data + t * qkv->strides[0];
    // Heads 0..Hq-1 are q, the next Hkv are k; the v heads after them are left alone.
    for (int64_t h = 0; h < hq + hkv; ++h)
      norm_rope_head(token + h * size * qkv->strides[1], qkv->strides[1], size, h < hq ? *q_weight : *k_weight, row,
                     cache->strides[1], static_cast<float>(eps->f), n);
  }
  return 0;
}
