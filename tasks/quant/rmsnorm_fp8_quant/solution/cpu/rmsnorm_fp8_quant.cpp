// quant/rmsnorm_fp8_quant on the cpu device: a plain loop over the rows, three sweeps each (the sum of
// squares, the amax of the normalized values, the quantization). Host memory, any strides, no
// dependencies beyond the ABI header.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "d2k/solution.h"

namespace {

constexpr double kFp8Max = 448.0;
constexpr float kAmaxFloor = 1.0f / 512.0f;  // amax / 448 below 1 / (448 * 512) is clamped: amax below 2^-9

float bf16_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// Round to nearest even, to bf16, kept as a float (finite values).
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
  std::frexp(a, &e);                              // a = m * 2^e, m in [0.5, 1)
  const int exponent = e - 1 < -6 ? -6 : e - 1;   // the subnormals share the step of 2^-6's binade
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

int fail(const d2k_call* call, const char* message) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "rmsnorm_fp8_quant (cpu): %s", message);
  return 1;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* x = find(call->inputs, call->num_inputs, "x");
  const d2k_tensor* w = find(call->inputs, call->num_inputs, "weight");
  const d2k_tensor* q = find(call->outputs, call->num_outputs, "q");
  const d2k_tensor* s = find(call->outputs, call->num_outputs, "scales");
  if (!x || !w || !q || !s) return fail(call, "expected inputs x, weight and outputs q, scales");
  if (call->num_scalars < 1 || std::strcmp(call->scalars[0].name, "eps") != 0) return fail(call, "expected scalar eps");
  if (x->dtype != D2K_BFLOAT16 || w->dtype != D2K_BFLOAT16 || q->dtype != D2K_FLOAT8_E4M3 || s->dtype != D2K_FLOAT32)
    return fail(call, "expected x, weight bf16, q f8e4m3, scales f32");
  if (x->rank != 2 || w->rank != 1 || q->rank != 2 || s->rank != 2) return fail(call, "expected x, q, scales of rank 2 and weight of rank 1");
  const int64_t T = x->shape[0], H = x->shape[1];
  if (w->shape[0] != H || q->shape[0] != T || q->shape[1] != H || s->shape[0] != T || s->shape[1] != 1)
    return fail(call, "expected weight [H], q [T, H] and scales [T, 1]");

  const auto* xd = static_cast<const uint16_t*>(x->data);
  const auto* wd = static_cast<const uint16_t*>(w->data);
  auto* qd = static_cast<uint8_t*>(q->data);
  auto* sd = static_cast<float*>(s->data);
  const float eps = static_cast<float>(call->scalars[0].f);
  std::vector<float> y(static_cast<size_t>(H));
  for (int64_t t = 0; t < T; ++t) {
    const uint16_t* xr = xd + t * x->strides[0];
    double sum_sq = 0.0;  // more accurate than the fp32 sum of the specification: within its tolerance
    for (int64_t i = 0; i < H; ++i) {
      const double v = bf16_to_float(xr[i * x->strides[1]]);
      sum_sq += v * v;
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(static_cast<float>(sum_sq / H) + eps));
    float amax = 0.0f;
    for (int64_t i = 0; i < H; ++i) {
      // bf16(bf16(x * inv) * weight): both products in fp32, each rounded to bf16.
      const float normed = round_bf16(bf16_to_float(xr[i * x->strides[1]]) * inv);
      y[i] = round_bf16(normed * bf16_to_float(wd[i * w->strides[0]]));
      amax = std::fmax(amax, std::fabs(y[i]));
    }
    const float floored = std::fmax(amax, kAmaxFloor);
    sd[t * s->strides[0]] = floored / static_cast<float>(kFp8Max);
    // In double, y * 448 / amax is exact where it lies on an fp8 rounding midpoint and far from one
    // otherwise (y and amax are bf16 values), so this rounds as the exact quotient does.
    for (int64_t i = 0; i < H; ++i)
      qd[t * q->strides[0] + i * q->strides[1]] = double_to_e4m3(static_cast<double>(y[i]) * kFp8Max / floored);
  }
  return 0;
}
