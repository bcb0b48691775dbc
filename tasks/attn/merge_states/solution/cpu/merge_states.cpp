// Plain host solution of attn/merge_states for the cpu device: per (token, head) row, the two LSEs (+inf
// made -inf), their max, the weights in fp32, each output element wa * Oa + wb * Ob in fp32 rounded once to
// bf16, and the merged LSE; any strides.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

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
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "merge_states (cpu): %s", message);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

bool is(const d2k_tensor* t, d2k_dtype dtype, int32_t rank) { return t && t->dtype == dtype && t->rank == rank; }

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* p_out = find(call->inputs, call->num_inputs, "prefix_output");
  const d2k_tensor* p_lse = find(call->inputs, call->num_inputs, "prefix_lse");
  const d2k_tensor* s_out = find(call->inputs, call->num_inputs, "suffix_output");
  const d2k_tensor* s_lse = find(call->inputs, call->num_inputs, "suffix_lse");
  const d2k_tensor* out = find(call->outputs, call->num_outputs, "output");
  const d2k_tensor* out_lse = find(call->outputs, call->num_outputs, "output_lse");
  if (!is(p_out, D2K_BFLOAT16, 3) || !is(s_out, D2K_BFLOAT16, 3) || !is(out, D2K_BFLOAT16, 3))
    return failed(call, "expects prefix_output, suffix_output and output [N, H, D] in bf16");
  if (!is(p_lse, D2K_FLOAT32, 2) || !is(s_lse, D2K_FLOAT32, 2) || !is(out_lse, D2K_FLOAT32, 2))
    return failed(call, "expects prefix_lse, suffix_lse and output_lse [H, N] in fp32");
  const int64_t tokens = out->shape[0], heads = out->shape[1], dim = out->shape[2];

  const auto* pa = static_cast<const uint16_t*>(p_out->data);
  const auto* sa = static_cast<const uint16_t*>(s_out->data);
  const auto* pl = static_cast<const float*>(p_lse->data);
  const auto* sl = static_cast<const float*>(s_lse->data);
  auto* o = static_cast<uint16_t*>(out->data);
  auto* ol = static_cast<float*>(out_lse->data);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t n = 0; n < tokens; ++n) {
    for (int64_t h = 0; h < heads; ++h) {
      float a = pl[h * p_lse->strides[0] + n * p_lse->strides[1]];
      float b = sl[h * s_lse->strides[0] + n * s_lse->strides[1]];
      if (a == inf) a = -inf;  // an empty part, as FlashAttention 2 marks it
      if (b == inf) b = -inf;
      const float m = std::fmax(a, b);
      const float ea = std::exp(a - m), eb = std::exp(b - m);
      const float se = ea + eb;
      const float wa = ea / se, wb = eb / se;
      ol[h * out_lse->strides[0] + n * out_lse->strides[1]] = m + std::log(se);
      for (int64_t i = 0; i < dim; ++i) {
        const float x = bf16_to_float(pa[n * p_out->strides[0] + h * p_out->strides[1] + i * p_out->strides[2]]);
        const float y = bf16_to_float(sa[n * s_out->strides[0] + h * s_out->strides[1] + i * s_out->strides[2]]);
        o[n * out->strides[0] + h * out->strides[1] + i * out->strides[2]] = float_to_bf16(wa * x + wb * y);
      }
    }
  }
  return 0;
}
