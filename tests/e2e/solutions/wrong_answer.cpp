// Must yield incorrect_numerics: adds the residual but skips the normalization.
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

extern "C" int d2k_run(const d2k_call* call) {
  auto* x = static_cast<uint16_t*>(call->inputs[0].data);
  auto* residual = static_cast<uint16_t*>(call->inputs[1].data);
  const int64_t n = call->inputs[0].shape[0] * call->inputs[0].shape[1];
  for (int64_t i = 0; i < n; ++i) {
    residual[i] = store(load(x, i) + load(residual, i));
    x[i] = residual[i];
  }
  return 0;
}
