// quant/fp8_group_quant on the cpu device: a plain loop over the groups of each row. Host memory,
// any strides, no dependencies beyond the ABI header.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr double kFp8Max = 448.0;

float bf16_to_float(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// OCP e4m3fn (bias 7, no infinities, 0x7f is NaN), round to nearest even, saturated to +-448.
uint8_t double_to_e4m3(double v) {
  if (std::isnan(v)) return 0x7f;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const double a = std::fabs(v);
  if (a >= kFp8Max) return sign | 0x7e;
  if (a == 0.0) return sign;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int exponent = e - 1 < -6 ? -6 : e - 1;  // below 2^-6 the step stays that of the subnormals
  const double step = std::ldexp(1.0, exponent - 3);
  // nearbyint rounds half to even in the default rounding mode. Counting in steps of the binade makes
  // subnormals and normals one formula: a carry into the next binade lands on the right encoding.
  const long steps = static_cast<long>(std::nearbyint(a / step));
  if (exponent == -6) return sign | static_cast<uint8_t>(steps);  // 8 steps is 2^-6, encoded 0x08
  const long mantissa = steps - 8;                                  // steps in [8, 16]
  const int biased = exponent + 7 + (mantissa == 8 ? 1 : 0);
  return sign | static_cast<uint8_t>((biased << 3) | (mantissa == 8 ? 0 : mantissa));
}

const d2k_tensor* find(const d2k_tensor* list, int32_t n, const char* name) {
  for (int32_t i = 0; i < n; ++i)
    if (std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

const d2k_scalar* find_scalar(const d2k_call* call, const char* name) {
  for (int32_t i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, name) == 0) return &call->scalars[i];
  return nullptr;
}

int fail(const d2k_call* call, const char* message) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "fp8_group_quant (cpu): %s", message);
  return 1;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* x = find(call->inputs, call->num_inputs, "x");
  const d2k_tensor* q = find(call->outputs, call->num_outputs, "q");
  const d2k_tensor* s = find(call->outputs, call->num_outputs, "scales");
  const d2k_scalar* group_size = find_scalar(call, "group_size");
  const d2k_scalar* ue8m0 = find_scalar(call, "ue8m0");
  const d2k_scalar* eps = find_scalar(call, "eps");
  if (!x || !q || !s) return fail(call, "expected input x and outputs q, scales");
  if (!group_size || !ue8m0 || !eps) return fail(call, "expected scalars group_size, ue8m0, eps");
  if (x->dtype != D2K_BFLOAT16 || q->dtype != D2K_FLOAT8_E4M3 || s->dtype != D2K_FLOAT32)
    return fail(call, "expected x bf16, q f8e4m3, scales f32");
  if (x->rank != 2 || q->rank != 2 || s->rank != 2) return fail(call, "expected rank-2 x, q, scales");
  const int64_t T = x->shape[0], K = x->shape[1], gs = group_size->i;
  if (gs <= 0 || K % gs != 0) return fail(call, "group_size must divide K");
  const int64_t G = K / gs;
  if (q->shape[0] != T || q->shape[1] != K || s->shape[0] != T || s->shape[1] != G)
    return fail(call, "q must be [T, K] and scales [T, K / group_size]");

  const auto* xd = static_cast<const uint16_t*>(x->data);
  auto* qd = static_cast<uint8_t*>(q->data);
  auto* sd = static_cast<float*>(s->data);
  const float eps_f = static_cast<float>(eps->f);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t g = 0; g < G; ++g) {
      const uint16_t* xg = xd + t * x->strides[0];
      float amax = 0.0f;
      for (int64_t k = g * gs; k < (g + 1) * gs; ++k)
        amax = std::fmax(amax, std::fabs(bf16_to_float(xg[k * x->strides[1]])));
      amax = std::fmax(amax, eps_f);
      float scale = amax / static_cast<float>(kFp8Max);
      if (ue8m0->i != 0) {  // 2^ceil(log2(scale)), the exponent read exactly: scale = m * 2^e
        int e;
        const float m = std::frexp(scale, &e);
        scale = std::ldexp(1.0f, m == 0.5f ? e - 1 : e);
      }
      sd[t * s->strides[0] + g * s->strides[1]] = scale;
      for (int64_t k = g * gs; k < (g + 1) * gs; ++k) {
        const double xv = bf16_to_float(xg[k * x->strides[1]]);
        // In double, x * 448 / amax is exact where it lies on an fp8 rounding midpoint and far from
        // one otherwise, so this rounds exactly as x / scale in exact arithmetic; with UE8M0 scales
        // x / scale is exact anyway.
        const double v = ue8m0->i != 0 ? xv / scale : xv * kFp8Max / amax;
        qd[t * q->strides[0] + k * q->strides[1]] = double_to_e4m3(v);
      }
    }
  }
  return 0;
}
