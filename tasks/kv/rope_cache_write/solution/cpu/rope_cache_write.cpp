// Plain host solution of kv/rope_cache_write for the cpu device: one token at a time, its q and k heads
// rotated in fp32 by the table row at its position and rounded once to bf16 (in place), then, when its slot
// is not -1, the rotated k and the v of each head stored into the slot's row of the caches: bf16 bits as
// they are (E = 2), or fp8 e4m3fn codes of value / scale, an fp32 division, saturated and rounded to nearest
// even (E = 1). Any token and head strides of q, k and v; the caches contiguous.
#include <cmath>
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

// Round to nearest, ties to even (the values here are finite).
uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// fp8 e4m3fn (bias 7, no infinities, 0x7f/0xff NaN), saturating at 448, round to nearest even. The
// magnitude is a whole number of steps of its binade's spacing 2^(e - 3) (subnormals: 2^-9): scale it to
// that grid, round it there (nearbyint: ties to even in the default rounding mode) and rebuild the code.
uint8_t float_to_fp8(float value) {
  const uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  float magnitude = std::fabs(value);
  if (std::isnan(value)) return sign | 0x7f;
  if (magnitude >= 448.0f) return sign | 0x7e;  // saturate: 448 = 1.75 * 2^8
  if (magnitude == 0.0f) return sign;
  int exponent;
  std::frexp(magnitude, &exponent);  // magnitude = m * 2^exponent, m in [0.5, 1)
  const int e = exponent - 1 < -6 ? -6 : exponent - 1;  // the binade's exponent, subnormals share -6
  const float steps = std::nearbyint(std::ldexp(magnitude, 3 - e));  // exact: a power-of-two scaling
  // steps is in [0, 16]: 16 carries into the next binade (the code arithmetic below does it by itself).
  const int code = e == -6 && steps < 8 ? static_cast<int>(steps) : ((e + 7) << 3) + static_cast<int>(steps) - 8;
  return sign | static_cast<uint8_t>(code);
}

int failed(const d2k_call* call, const char* message, const char* name) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "rope_cache_write (cpu): %s '%s'", message, name);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

// Rotates every head of token t of x in place with the row's cos (first half) and sin (second half).
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

// Stores every head of token t of x (bf16) into the cache row of `slot`: [heads, D] elements of E bytes.
void store_token(const d2k_tensor& x, int64_t t, uint8_t* cache, int64_t slot, int64_t element_bytes, float scale) {
  const auto* data = static_cast<const uint16_t*>(x.data);
  const int64_t heads = x.shape[1], head_size = x.shape[2];
  uint8_t* row = cache + slot * heads * head_size * element_bytes;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < head_size; ++i) {
      const uint16_t bits = data[t * x.strides[0] + h * x.strides[1] + i * x.strides[2]];
      uint8_t* at = row + (h * head_size + i) * element_bytes;
      if (element_bytes == 2) {
        std::memcpy(at, &bits, 2);  // little-endian, as the device stores it
      } else {
        *at = float_to_fp8(bf16_to_float(bits) / scale);
      }
    }
  }
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* positions = find(call->inputs, call->num_inputs, "positions");
  const d2k_tensor* table = find(call->inputs, call->num_inputs, "cos_sin_cache");
  const d2k_tensor* slots = find(call->inputs, call->num_inputs, "slot_mapping");
  const d2k_tensor* v = find(call->inputs, call->num_inputs, "v");
  const d2k_tensor* k_scale = find(call->inputs, call->num_inputs, "k_scale");
  const d2k_tensor* v_scale = find(call->inputs, call->num_inputs, "v_scale");
  const d2k_tensor* q = find(call->outputs, call->num_outputs, "q");
  const d2k_tensor* k = find(call->outputs, call->num_outputs, "k");
  const d2k_tensor* key_cache = find(call->outputs, call->num_outputs, "key_cache");
  const d2k_tensor* value_cache = find(call->outputs, call->num_outputs, "value_cache");
  if (!positions || !table || !slots || !v || !k_scale || !v_scale) return failed(call, "missing an input among", "positions, cos_sin_cache, slot_mapping, v, k_scale, v_scale");
  if (!q || !k || !key_cache || !value_cache) return failed(call, "missing an output among", "q, k, key_cache, value_cache");
  if (positions->dtype != D2K_INT64 || positions->rank != 1) return failed(call, "expects a rank-1 int64 tensor", "positions");
  if (slots->dtype != D2K_INT64 || slots->rank != 1) return failed(call, "expects a rank-1 int64 tensor", "slot_mapping");
  if (table->dtype != D2K_BFLOAT16 || table->rank != 2) return failed(call, "expects a rank-2 bf16 tensor", "cos_sin_cache");
  if (k_scale->dtype != D2K_FLOAT32 || v_scale->dtype != D2K_FLOAT32) return failed(call, "expects fp32 scales", "k_scale");
  const int64_t tokens = positions->shape[0], head_size = k->shape[2];
  for (const d2k_tensor* x : {q, k, v}) {
    if (x->dtype != D2K_BFLOAT16 || x->rank != 3) return failed(call, "expects a rank-3 bf16 tensor", x->name);
    if (x->shape[0] != tokens || x->shape[2] != table->shape[1] || x->shape[2] % 2 != 0)
      return failed(call, "expects [T, heads, D] with D the table's (even) width for", x->name);
  }
  if (slots->shape[0] != tokens) return failed(call, "expects one slot per token in", "slot_mapping");
  const int64_t element_bytes = key_cache->shape[3] / head_size;
  for (const d2k_tensor* cache : {key_cache, value_cache}) {
    if (cache->dtype != D2K_UINT8 || cache->rank != 4 || cache->shape[2] != k->shape[1] ||
        cache->shape[3] != head_size * element_bytes || (element_bytes != 1 && element_bytes != 2))
      return failed(call, "expects uint8 [blocks, block_size, Hkv, D * E] (E 1 or 2) for", cache->name);
  }
  const int64_t capacity = key_cache->shape[0] * key_cache->shape[1];

  const auto* pos = static_cast<const int64_t*>(positions->data);
  const auto* slot = static_cast<const int64_t*>(slots->data);
  const auto* rows = static_cast<const uint16_t*>(table->data);
  const float ks = *static_cast<const float*>(k_scale->data), vs = *static_cast<const float*>(v_scale->data);
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t p = pos[t * positions->strides[0]];
    if (p < 0 || p >= table->shape[0]) return failed(call, "a position lies outside the table", "positions");
    const uint16_t* row = rows + p * table->strides[0];
    rotate_token(*q, t, row, table->strides[1]);
    rotate_token(*k, t, row, table->strides[1]);
    const int64_t s = slot[t * slots->strides[0]];
    if (s < 0) continue;  // a padding token: its slot is -1, nothing is cached
    if (s >= capacity) return failed(call, "a slot lies outside the cache", "slot_mapping");
    store_token(*k, t, static_cast<uint8_t*>(key_cache->data), s, element_bytes, ks);
    store_token(*v, t, static_cast<uint8_t*>(value_cache->data), s, element_bytes, vs);
  }
  return 0;
}
