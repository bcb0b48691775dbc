// An honest quant/fp8_group_quant on the cpu device (any strides), shared by the cheats of the corpus:
// each cheat's d2k_run is this kernel plus its trick. corpus.sh builds each cheat as a folder solution
// with this header beside it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "d2k/solution.h"

static float bf16_value(uint16_t bits) {
  uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// OCP e4m3fn, round to nearest even, saturated to +-448.
static uint8_t to_e4m3(double v) {
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const double a = std::fabs(v);
  if (a >= 448.0) return sign | 0x7e;
  if (a == 0.0) return sign;
  int e;
  std::frexp(a, &e);
  const int exponent = e - 1 < -6 ? -6 : e - 1;
  const long steps = long(std::nearbyint(a / std::ldexp(1.0, exponent - 3)));
  if (exponent == -6) return sign | uint8_t(steps);
  const long mantissa = steps - 8;
  return sign | uint8_t(((exponent + 7 + (mantissa == 8)) << 3) | (mantissa == 8 ? 0 : mantissa));
}

static double scalar(const d2k_call* call, const char* name) {
  for (int i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, name) == 0)
      return call->scalars[i].kind == D2K_SCALAR_INT ? double(call->scalars[i].i) : call->scalars[i].f;
  return 0;
}

static void quantize(const d2k_call* call) {
  const d2k_tensor &x = call->inputs[0], &q = call->outputs[0], &s = call->outputs[1];
  const int64_t T = x.shape[0], K = x.shape[1], G = K / 128;
  const bool ue8m0 = scalar(call, "ue8m0") != 0;
  const float eps = float(scalar(call, "eps"));
  const auto* xd = static_cast<const uint16_t*>(x.data);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t g = 0; g < G; ++g) {
      float amax = 0;
      for (int64_t k = g * 128; k < g * 128 + 128; ++k)
        amax = std::fmax(amax, std::fabs(bf16_value(xd[t * x.strides[0] + k * x.strides[1]])));
      amax = std::fmax(amax, eps);
      float scale = amax / 448.0f;
      if (ue8m0) {
        int e;
        const float m = std::frexp(scale, &e);
        scale = std::ldexp(1.0f, m == 0.5f ? e - 1 : e);
      }
      static_cast<float*>(s.data)[t * s.strides[0] + g * s.strides[1]] = scale;
      for (int64_t k = g * 128; k < g * 128 + 128; ++k) {
        const double v = bf16_value(xd[t * x.strides[0] + k * x.strides[1]]);
        static_cast<uint8_t*>(q.data)[t * q.strides[0] + k * q.strides[1]] =
            to_e4m3(ue8m0 ? v / scale : v * 448.0 / amax);
      }
    }
  }
}

[[maybe_unused]] static int64_t span_bytes(const d2k_tensor& t, int64_t element) {
  int64_t last = 0;
  for (int d = 0; d < t.rank; ++d) last += (t.shape[d] - 1) * t.strides[d];
  return (last + 1) * element;
}
