// A hurried implementer's mistake (issue 11), not a cheat: kv/rope_cache_write with the slot mapping used
// as an index without the -1 check, the way `key_cache.view(-1, H, D)[slot_mapping] = k` does in eager
// torch: a padding token's slot -1 wraps to the cache's last slot, whose bytes belong to another sequence.
// Otherwise honest (fp32 rotation rounded once, bf16 bits or fp8 codes of value / scale). Caught: the
// last slot's 1024 elements change: incorrect_numerics, "'key_cache'" (the first failing output in name
// order; q and k are right).
#include <cmath>
#include <cstring>

#include "bf16_bits.h"
#include "d2k/solution.h"

namespace {

uint8_t to_fp8(float value) {  // saturating, round to nearest even
  const uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  const float magnitude = std::fabs(value);
  if (magnitude >= 448.0f) return sign | 0x7e;
  if (magnitude == 0.0f) return sign;
  int exponent;
  std::frexp(magnitude, &exponent);
  const int e = exponent - 1 < -6 ? -6 : exponent - 1;
  const int steps = static_cast<int>(std::nearbyint(std::ldexp(magnitude, 3 - e)));
  return sign | static_cast<uint8_t>(e == -6 && steps < 8 ? steps : ((e + 7) << 3) + steps - 8);
}

const d2k_tensor& named(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (std::strcmp(list[i].name, name) == 0) return list[i];
  return list[0];
}

void rotate(const d2k_tensor& x, int64_t t, const uint16_t* row) {
  auto* data = static_cast<uint16_t*>(x.data);
  const int64_t half = x.shape[2] / 2;
  for (int64_t h = 0; h < x.shape[1]; ++h) {
    uint16_t* head = data + t * x.strides[0] + h * x.strides[1];
    for (int64_t i = 0; i < half; ++i) {
      const float c = bf16_to_float(row[i]), s = bf16_to_float(row[half + i]);
      const float a = bf16_to_float(head[i]), b = bf16_to_float(head[half + i]);
      head[i] = round_to_bf16(a * c - b * s);
      head[half + i] = round_to_bf16(b * c + a * s);
    }
  }
}

void store(const d2k_tensor& x, int64_t t, const d2k_tensor& cache, int64_t slot, float scale) {
  const int64_t heads = x.shape[1], size = x.shape[2], bytes = cache.shape[3] / size;
  auto* row = static_cast<uint8_t*>(cache.data) + slot * heads * size * bytes;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < size; ++i) {
      const uint16_t bits = static_cast<const uint16_t*>(x.data)[t * x.strides[0] + h * x.strides[1] + i];
      if (bytes == 2) std::memcpy(row + (h * size + i) * 2, &bits, 2);
      else row[h * size + i] = to_fp8(bf16_to_float(bits) / scale);
    }
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const auto in = [&](const char* name) -> const d2k_tensor& { return named(call->inputs, call->num_inputs, name); };
  const auto out = [&](const char* name) -> const d2k_tensor& { return named(call->outputs, call->num_outputs, name); };
  const auto* positions = static_cast<const int64_t*>(in("positions").data);
  const auto* slots = static_cast<const int64_t*>(in("slot_mapping").data);
  const auto* table = static_cast<const uint16_t*>(in("cos_sin_cache").data);
  const d2k_tensor& key_cache = out("key_cache");
  const int64_t capacity = key_cache.shape[0] * key_cache.shape[1];
  for (int64_t t = 0; t < in("positions").shape[0]; ++t) {
    const uint16_t* row = table + positions[t] * in("cos_sin_cache").strides[0];
    rotate(out("q"), t, row);
    rotate(out("k"), t, row);
    const int64_t slot = slots[t] < 0 ? slots[t] + capacity : slots[t];  // the mistake: -1 is the last slot
    store(out("k"), t, key_cache, slot, *static_cast<const float*>(in("k_scale").data));
    store(in("v"), t, out("value_cache"), slot, *static_cast<const float*>(in("v_scale").data));
  }
  return 0;
}
