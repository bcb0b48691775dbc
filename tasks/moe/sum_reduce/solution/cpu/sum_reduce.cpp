// Plain host solution of moe/sum_reduce for the cpu device: per output element, the k expert values
// summed in fp32 in order, scaled, rounded once to bf16 (the task description's order); any strides.
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
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "sum_reduce (cpu): %s", message);
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
  if (!x || !out) return failed(call, "missing the input 'x' or the output 'out'");
  if (x->dtype != D2K_BFLOAT16 || x->rank != 3 || out->dtype != D2K_BFLOAT16 || out->rank != 2)
    return failed(call, "expects x [T, k, H] and out [T, H] in bf16");
  if (out->shape[0] != x->shape[0] || out->shape[1] != x->shape[2]) return failed(call, "out's shape is not [T, H]");
  double scale = 0.0;
  bool found = false;
  for (int32_t i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, "routed_scaling_factor") == 0) scale = call->scalars[i].f, found = true;
  if (!found) return failed(call, "missing the scalar 'routed_scaling_factor'");
  const float s = static_cast<float>(scale);

  const auto* in = static_cast<const uint16_t*>(x->data);
  auto* o = static_cast<uint16_t*>(out->data);
  for (int64_t t = 0; t < x->shape[0]; ++t) {
    for (int64_t h = 0; h < x->shape[2]; ++h) {
      float sum = 0.0f;
      for (int64_t j = 0; j < x->shape[1]; ++j) sum += bf16_to_float(in[t * x->strides[0] + j * x->strides[1] + h * x->strides[2]]);
      o[t * out->strides[0] + h * out->strides[1]] = float_to_bf16(s * sum);
    }
  }
  return 0;
}
