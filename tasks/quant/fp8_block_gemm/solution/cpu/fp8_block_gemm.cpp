// Plain host solution of quant/fp8_block_gemm for the cpu device: per output element, per 128-wide K block,
// the fp32 dot product of the e4m3 codes, scaled by the token's and the weight block's scales and added to
// an fp32 sum; one rounding to bf16 at the end. Any strides (sa comes MN-major with padded columns).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr int64_t kBlock = 128;

// OCP e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, 0x7f / 0xff are NaN.
float e4m3_to_float(uint8_t bits) {
  const int sign = bits >> 7, exponent = (bits >> 3) & 0xf, mantissa = bits & 0x7;
  float magnitude;
  if (exponent == 0xf && mantissa == 0x7) {
    magnitude = NAN;
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m / 8 * 2^-6
  } else {
    magnitude = std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
  }
  return sign ? -magnitude : magnitude;
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
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "fp8_block_gemm (cpu): %s", message);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* a = find(call->inputs, call->num_inputs, "a");
  const d2k_tensor* sa = find(call->inputs, call->num_inputs, "sa");
  const d2k_tensor* b = find(call->inputs, call->num_inputs, "b");
  const d2k_tensor* sb = find(call->inputs, call->num_inputs, "sb");
  const d2k_tensor* c = find(call->outputs, call->num_outputs, "c");
  if (!a || !sa || !b || !sb || !c) return failed(call, "missing one of the inputs a, sa, b, sb or the output c");
  if (a->dtype != D2K_FLOAT8_E4M3 || b->dtype != D2K_FLOAT8_E4M3 || sa->dtype != D2K_FLOAT32 ||
      sb->dtype != D2K_FLOAT32 || c->dtype != D2K_BFLOAT16)
    return failed(call, "expects e4m3 a and b, fp32 sa and sb, bf16 c");
  const int64_t M = a->shape[0], K = a->shape[1], N = b->shape[0], KB = K / kBlock;
  if (K % kBlock != 0 || b->shape[1] != K || sa->shape[0] != M || sa->shape[1] != KB ||
      sb->shape[0] != (N + kBlock - 1) / kBlock || sb->shape[1] != KB || c->shape[0] != M || c->shape[1] != N)
    return failed(call, "shapes disagree: expects a [M, K], sa [M, K/128], b [N, K], sb [ceil(N/128), K/128], c [M, N]");

  float table[256];
  for (int i = 0; i < 256; ++i) table[i] = e4m3_to_float(static_cast<uint8_t>(i));
  const auto* pa = static_cast<const uint8_t*>(a->data);
  const auto* pb = static_cast<const uint8_t*>(b->data);
  const auto* psa = static_cast<const float*>(sa->data);
  const auto* psb = static_cast<const float*>(sb->data);
  auto* pc = static_cast<uint16_t*>(c->data);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t kb = 0; kb < KB; ++kb) {
        float partial = 0.0f;
        for (int64_t k = kb * kBlock; k < (kb + 1) * kBlock; ++k)
          partial += table[pa[m * a->strides[0] + k * a->strides[1]]] * table[pb[n * b->strides[0] + k * b->strides[1]]];
        const float scale_a = psa[m * sa->strides[0] + kb * sa->strides[1]];
        const float scale_b = psb[(n / kBlock) * sb->strides[0] + kb * sb->strides[1]];
        acc += partial * scale_a * scale_b;
      }
      pc[m * c->strides[0] + n * c->strides[1]] = float_to_bf16(acc);
    }
  }
  return 0;
}
