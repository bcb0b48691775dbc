// A hurried implementer's mistake (issue 11), not a cheat: attn/qk_norm_rope with the RMSNorm taken over the
// whole q (or k) projection of a token, all heads together (OLMo-2's qk-norm), instead of over each head's
// 128 values (Qwen3's); the weights, the rounding points and the neox rotation are right, v is left alone.
// Caught: every head whose own scale differs from the projection's is off by that ratio (a few percent for
// unit-scale normal projections): incorrect_numerics, "'k'" (the first compared tensor the check names, in
// name order).
#include <cmath>
#include <cstring>
#include <vector>

#include "bf16_bits.h"
#include "d2k/solution.h"

namespace {

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

int64_t scalar_int(const d2k_call* call, const char* name) {
  for (int32_t i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, name) == 0) return call->scalars[i].i;
  return 0;
}

double scalar_float(const d2k_call* call, const char* name) {
  for (int32_t i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, name) == 0) return call->scalars[i].f;
  return 0.0;
}

float round_bf16(float value) { return bf16_to_float(round_to_bf16(value)); }

// Normalizes `heads` heads of `size` values starting at `first` with one variance over all of them (the
// mistake), then rotates each head by the row.
void norm_rope(uint16_t* first, int64_t heads, int64_t size, const uint16_t* weight, const uint16_t* row, float eps) {
  float sum = 0.0f;
  for (int64_t j = 0; j < heads * size; ++j) sum += bf16_to_float(first[j]) * bf16_to_float(first[j]);
  const float inv = 1.0f / std::sqrt(sum / static_cast<float>(heads * size) + eps);
  std::vector<float> n(static_cast<std::size_t>(size));
  const int64_t half = size / 2;
  for (int64_t h = 0; h < heads; ++h) {
    uint16_t* head = first + h * size;
    for (int64_t j = 0; j < size; ++j) n[j] = round_bf16(round_bf16(bf16_to_float(head[j]) * inv) * bf16_to_float(weight[j]));
    for (int64_t i = 0; i < half; ++i) {
      const float c = bf16_to_float(row[i]), s = bf16_to_float(row[half + i]);
      head[i] = round_to_bf16(n[i] * c - n[half + i] * s);
      head[half + i] = round_to_bf16(n[half + i] * c + n[i] * s);
    }
  }
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* qkv = find(call->outputs, call->num_outputs, "qkv");
  const auto* q_weight = static_cast<const uint16_t*>(find(call->inputs, call->num_inputs, "q_weight")->data);
  const auto* k_weight = static_cast<const uint16_t*>(find(call->inputs, call->num_inputs, "k_weight")->data);
  const auto* positions = static_cast<const int64_t*>(find(call->inputs, call->num_inputs, "positions")->data);
  const d2k_tensor* cache = find(call->inputs, call->num_inputs, "cos_sin_cache");
  const int64_t hq = scalar_int(call, "num_heads_q"), hkv = scalar_int(call, "num_heads_kv"), size = cache->shape[1];
  const auto eps = static_cast<float>(scalar_float(call, "eps"));
  for (int64_t t = 0; t < qkv->shape[0]; ++t) {
    uint16_t* row = static_cast<uint16_t*>(qkv->data) + t * qkv->strides[0];  // contiguous rows
    const uint16_t* table = static_cast<const uint16_t*>(cache->data) + positions[t] * cache->strides[0];
    norm_rope(row, hq, size, q_weight, table, eps);
    norm_rope(row + hq * size, hkv, size, k_weight, table, eps);
  }
  return 0;
}
