// Must yield incorrect_dtype: computes fused_add_rmsnorm right but writes x as float32 into the bf16
// output (twice the bytes: it runs past the end of x, which the guard regions see).
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

extern "C" int d2k_run(const d2k_call* call) {
  auto* x = static_cast<uint16_t*>(call->inputs[0].data);
  auto* residual = static_cast<uint16_t*>(call->inputs[1].data);
  const auto* weight = static_cast<const uint16_t*>(call->inputs[2].data);
  const int64_t rows = call->inputs[0].shape[0], h = call->inputs[0].shape[1];
  double eps = 1e-6;
  for (int i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, "eps") == 0) eps = call->scalars[i].f;
  float* x_as_f32 = reinterpret_cast<float*>(x);
  for (int64_t r = 0; r < rows; ++r) {
    float sum = 0;
    for (int64_t c = 0; c < h; ++c) {
      const int64_t i = r * h + c;
      residual[i] = store(load(x, i) + load(residual, i));
      sum += load(residual, i) * load(residual, i);
    }
    const float inv = 1.0f / std::sqrt(sum / h + float(eps));
    // Backwards, so the float32 writes never overwrite bf16 values still to be read (one row, T = 1).
    for (int64_t c = h - 1; c >= 0; --c) {
      const int64_t i = r * h + c;
      x_as_f32[i] = load(residual, i) * inv * load(weight, c);
    }
  }
  return 0;
}
