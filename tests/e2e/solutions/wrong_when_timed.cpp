// Must yield rejected: the cpu expert solution of norm/fused_add_rmsnorm, right on its first four calls
// (the second draw, its repeat, the correctness call and the warm-up) and wrong from then on, where one
// element of x is off by far more than the tolerance: right while it is checked, wrong while it is
// timed. Every timed call runs on inputs patched for it and a few of them, chosen after the fact (always
// the last), are checked against their own oracles, so a harness that checks only the correctness call
// passes it and this one does not.
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
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "fused_add_rmsnorm (cpu): %s '%s'", message, name);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

}  // namespace

static int run_correctly(const d2k_call* call) {
  const d2k_tensor* x_in = find(call->inputs, call->num_inputs, "x");
  const d2k_tensor* res_in = find(call->inputs, call->num_inputs, "residual");
  const d2k_tensor* weight = find(call->inputs, call->num_inputs, "weight");
  const d2k_tensor* x_out = find(call->outputs, call->num_outputs, "x");
  const d2k_tensor* res_out = find(call->outputs, call->num_outputs, "residual");
  if (!x_in) return failed(call, "missing input", "x");
  if (!res_in) return failed(call, "missing input", "residual");
  if (!weight) return failed(call, "missing input", "weight");
  if (!x_out) return failed(call, "missing output", "x");
  if (!res_out) return failed(call, "missing output", "residual");
  for (const d2k_tensor* t : {x_in, res_in, x_out, res_out})
    if (t->dtype != D2K_BFLOAT16 || t->rank != 2) return failed(call, "expects a rank-2 bf16 tensor", t->name);
  if (weight->dtype != D2K_BFLOAT16 || weight->rank != 1) return failed(call, "expects a rank-1 bf16 tensor", "weight");
  const int64_t rows = x_in->shape[0];
  const int64_t hidden = x_in->shape[1];
  for (const d2k_tensor* t : {res_in, x_out, res_out})
    if (t->shape[0] != rows || t->shape[1] != hidden) return failed(call, "shape differs from x for", t->name);
  if (weight->shape[0] != hidden) return failed(call, "length differs from x's last dimension for", "weight");

  double eps = -1.0;
  for (int32_t i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, "eps") == 0) eps = call->scalars[i].f;
  if (eps < 0.0) return failed(call, "missing or negative scalar", "eps");
  const float eps_f = static_cast<float>(eps);

  const auto* xi = static_cast<const uint16_t*>(x_in->data);
  const auto* ri = static_cast<const uint16_t*>(res_in->data);
  const auto* w = static_cast<const uint16_t*>(weight->data);
  auto* xo = static_cast<uint16_t*>(x_out->data);
  auto* ro = static_cast<uint16_t*>(res_out->data);
  for (int64_t t = 0; t < rows; ++t) {
    // Pass 1 writes the rounded sum, pass 2 reads it back: each element is read before it is written,
    // so this is safe when the outputs are the inputs' own memory.
    float sum_sq = 0.0f;
    for (int64_t i = 0; i < hidden; ++i) {
      const float sum = bf16_to_float(xi[t * x_in->strides[0] + i * x_in->strides[1]]) +
                        bf16_to_float(ri[t * res_in->strides[0] + i * res_in->strides[1]]);
      const uint16_t rounded = float_to_bf16(sum);
      ro[t * res_out->strides[0] + i * res_out->strides[1]] = rounded;
      const float r = bf16_to_float(rounded);
      sum_sq += r * r;
    }
    const float inv = 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + eps_f);
    for (int64_t i = 0; i < hidden; ++i) {
      const float r = bf16_to_float(ro[t * res_out->strides[0] + i * res_out->strides[1]]);
      const float wi = bf16_to_float(w[i * weight->strides[0]]);
      xo[t * x_out->strides[0] + i * x_out->strides[1]] = float_to_bf16(round_bf16(r * inv) * wi);
    }
  }
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  static int calls = 0;
  const int status = run_correctly(call);
  if (++calls >= 5 && status == 0) {
    const d2k_tensor* x = find(call->outputs, call->num_outputs, "x");
    auto* first = static_cast<uint16_t*>(x->data);
    *first = float_to_bf16(2.0f * bf16_to_float(*first) + 1.0f);
  }
  return status;
}
