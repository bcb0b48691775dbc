// moe/silu_mul_fp8_quant on the cpu device: a plain loop over the groups of each row. Host memory, any
// strides (x's, q's and the scales'), no dependencies beyond the ABI header.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr double kFp8Max = 448.0;
constexpr int64_t kGroup = 128;

float bf16_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// Round to nearest even, to bf16, kept as a float (finite values and infinities).
float round_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// OCP e4m3fn (bias 7, no infinities), round to nearest even, saturated to +-448.
uint8_t double_to_e4m3(double v) {
  if (std::isnan(v)) return 0x7f;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const double a = std::fabs(v);
  if (a >= kFp8Max) return sign | 0x7e;
  if (a == 0.0) return sign;
  int e;
  std::frexp(a, &e);                             // a = m * 2^e, m in [0.5, 1)
  const int exponent = e - 1 < -6 ? -6 : e - 1;  // the subnormals share the step of 2^-6's binade
  const double step = std::ldexp(1.0, exponent - 3);
  // Counted in steps of the binade, subnormals and normals are one formula, and a carry into the next
  // binade lands on the right encoding. nearbyint rounds half to even.
  const long steps = static_cast<long>(std::nearbyint(a / step));
  if (exponent == -6) return sign | static_cast<uint8_t>(steps);
  const long mantissa = steps - 8;  // in [0, 8]
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
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "silu_mul_fp8_quant (cpu): %s", message);
  return 1;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* x = find(call->inputs, call->num_inputs, "x");
  const d2k_tensor* q = find(call->outputs, call->num_outputs, "q");
  const d2k_tensor* s = find(call->outputs, call->num_outputs, "scales");
  const d2k_scalar* group_size = find_scalar(call, "group_size");
  const d2k_scalar* eps = find_scalar(call, "eps");
  if (!x || !q || !s) return fail(call, "expected input x and outputs q, scales");
  if (!group_size || !eps) return fail(call, "expected scalars group_size, eps");
  if (group_size->i != kGroup) return fail(call, "only group_size 128 is supported");
  if (x->dtype != D2K_BFLOAT16 || q->dtype != D2K_FLOAT8_E4M3 || s->dtype != D2K_FLOAT32)
    return fail(call, "expected x bf16, q f8e4m3, scales f32");
  if (x->rank != 2 || q->rank != 2 || s->rank != 2) return fail(call, "expected x, q, scales of rank 2");
  const int64_t T = x->shape[0], I = x->shape[1] / 2;
  if (x->shape[1] != 2 * I || I % kGroup != 0) return fail(call, "x must be [T, 2I] with I a multiple of 128");
  const int64_t G = I / kGroup;
  if (q->shape[0] != T || q->shape[1] != I || s->shape[0] != T || s->shape[1] != G)
    return fail(call, "q must be [T, I] and scales [T, I / 128]");

  const auto* xd = static_cast<const uint16_t*>(x->data);
  auto* qd = static_cast<uint8_t*>(q->data);
  auto* sd = static_cast<float*>(s->data);
  const float eps_f = static_cast<float>(eps->f);
  float y[kGroup];
  for (int64_t t = 0; t < T; ++t) {
    const uint16_t* row = xd + t * x->strides[0];
    for (int64_t k = 0; k < G; ++k) {
      float amax = 0.0f;
      for (int64_t j = 0; j < kGroup; ++j) {
        const int64_t i = k * kGroup + j;
        const float g = bf16_to_float(row[i * x->strides[1]]);
        const float u = bf16_to_float(row[(I + i) * x->strides[1]]);
        // silu in fp32 (exp(-g) overflows to +inf for g below -88: the quotient is then -0), rounded to
        // bf16, then the product rounded to bf16.
        const float silu = round_bf16(g / (1.0f + std::exp(-g)));
        y[j] = round_bf16(silu * u);
        amax = std::fmax(amax, std::fabs(y[j]));
      }
      amax = std::fmax(amax, eps_f);
      sd[t * s->strides[0] + k * s->strides[1]] = amax / static_cast<float>(kFp8Max);
      // In double, y * 448 / amax is exact where it lies on an fp8 rounding midpoint and far from one
      // otherwise (y and amax are bf16 values), so this rounds as the exact quotient does.
      for (int64_t j = 0; j < kGroup; ++j) {
        const int64_t i = k * kGroup + j;
        qd[t * q->strides[0] + i * q->strides[1]] = double_to_e4m3(static_cast<double>(y[j]) * kFp8Max / amax);
      }
    }
  }
  return 0;
}
