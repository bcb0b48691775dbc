// Must yield rejected: computes fused_add_rmsnorm right, then zeroes the weight, an input that is not
// an in-place output (a later call would then have nothing to multiply: inputs are read-only).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "d2k/solution.h"

static float load(const uint16_t* p, int64_t i) {
  uint32_t bits = uint32_t(p[i]) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
static uint16_t store(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return uint16_t((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

static float round_bf16(float f) {
  const uint16_t b = store(f);
  return load(&b, 0);
}

extern "C" int d2k_run(const d2k_call* call) {
  auto* x = static_cast<uint16_t*>(call->inputs[0].data);
  auto* residual = static_cast<uint16_t*>(call->inputs[1].data);
  auto* weight = static_cast<uint16_t*>(call->inputs[2].data);
  const int64_t rows = call->inputs[0].shape[0], h = call->inputs[0].shape[1];
  double eps = 1e-6;
  for (int i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, "eps") == 0) eps = call->scalars[i].f;
  for (int64_t r = 0; r < rows; ++r) {
    float sum = 0;
    for (int64_t c = 0; c < h; ++c) {
      const int64_t i = r * h + c;
      residual[i] = store(load(x, i) + load(residual, i));
      sum += load(residual, i) * load(residual, i);
    }
    const float inv = 1.0f / std::sqrt(sum / h + float(eps));
    for (int64_t c = 0; c < h; ++c) {
      const int64_t i = r * h + c;
      x[i] = store(round_bf16(load(residual, i) * inv) * load(weight, c));
    }
  }
  std::memset(weight, 0, sizeof(uint16_t) * h);
  return 0;
}
