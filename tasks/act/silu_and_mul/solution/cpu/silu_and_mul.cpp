// Plain host solution of act/silu_and_mul for the cpu device: one row at a time, the rounding order of
// the task description (silu rounded to bf16, then the product rounded), any strides.
#include <cmath>
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

int failed(const d2k_call* call, const char* message, const char* name) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "silu_and_mul (cpu): %s '%s'", message, name);
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
  const d2k_tensor* out = find(call->outputs, call->num_outputs, "out");
  if (!x) return failed(call, "missing input", "x");
  if (!out) return failed(call, "missing output", "out");
  if (x->dtype != D2K_BFLOAT16 || x->rank != 2) return failed(call, "expects a rank-2 bf16 tensor", "x");
  if (out->dtype != D2K_BFLOAT16 || out->rank != 2) return failed(call, "expects a rank-2 bf16 tensor", "out");
  const int64_t rows = x->shape[0], width = out->shape[1];
  if (out->shape[0] != rows || x->shape[1] != 2 * width) return failed(call, "expects [T, 2I] -> [T, I] for", "out");

  const auto* in = static_cast<const uint16_t*>(x->data);
  auto* o = static_cast<uint16_t*>(out->data);
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t i = 0; i < width; ++i) {
      const float g = bf16_to_float(in[t * x->strides[0] + i * x->strides[1]]);
      const float u = bf16_to_float(in[t * x->strides[0] + (width + i) * x->strides[1]]);
      // exp(-g) overflows to +inf for g below about -88: g / inf is -0, what the exact value rounds to.
      const float silu = bf16_to_float(float_to_bf16(g / (1.0f + std::exp(-g))));
      o[t * out->strides[0] + i * out->strides[1]] = float_to_bf16(silu * u);
    }
  }
  return 0;
}
