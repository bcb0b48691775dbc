// A hurried implementer's mistake (issue 11), not a cheat: kv/rope_cache_write with the key cache written
// from k as it came in, before the rotation (the cache write placed ahead of the rope in a fused loop);
// q and k themselves are rotated correctly in place and padding tokens are skipped. Caught: nearly every
// written element of the key cache differs: incorrect_numerics, "'key_cache'".
#include <cstring>

#include "bf16_bits.h"
#include "d2k/solution.h"

namespace {

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

// bf16 caches only (the workload it is caught on); an fp8 cache is refused.
void store(const d2k_tensor& x, int64_t t, const d2k_tensor& cache, int64_t slot) {
  const int64_t heads = x.shape[1], size = x.shape[2];
  auto* row = static_cast<uint16_t*>(cache.data) + slot * heads * size;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < size; ++i)
      row[h * size + i] = static_cast<const uint16_t*>(x.data)[t * x.strides[0] + h * x.strides[1] + i];
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const auto in = [&](const char* name) -> const d2k_tensor& { return named(call->inputs, call->num_inputs, name); };
  const auto out = [&](const char* name) -> const d2k_tensor& { return named(call->outputs, call->num_outputs, name); };
  if (out("key_cache").shape[3] != 2 * out("k").shape[2]) {
    std::strcpy(call->error, "wrong_cache_before_rotation: bf16 caches only");
    return 1;
  }
  const auto* positions = static_cast<const int64_t*>(in("positions").data);
  const auto* slots = static_cast<const int64_t*>(in("slot_mapping").data);
  const auto* table = static_cast<const uint16_t*>(in("cos_sin_cache").data);
  for (int64_t t = 0; t < in("positions").shape[0]; ++t) {
    if (slots[t] >= 0) {
      store(out("k"), t, out("key_cache"), slots[t]);  // the mistake: k before its rotation
      store(in("v"), t, out("value_cache"), slots[t]);
    }
    const uint16_t* row = table + positions[t] * in("cos_sin_cache").strides[0];
    rotate(out("q"), t, row);
    rotate(out("k"), t, row);
  }
  return 0;
}
