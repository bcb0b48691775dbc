// Threat 8, exploiting an absolute tolerance: writes zeros to q and tiny scales, so every
// dequantized value is within any absolute tolerance of the small ones.
// Caught: tolerances are relative to the output's scale (atol * rms(want)) and NMSE is bounded:
// incorrect_numerics, "outside tolerance".
#include <cstdint>
#include <cstring>

#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor &q = call->outputs[0], &s = call->outputs[1];
  for (int64_t t = 0; t < q.shape[0]; ++t)
    for (int64_t k = 0; k < q.shape[1]; ++k) static_cast<uint8_t*>(q.data)[t * q.strides[0] + k * q.strides[1]] = 0;
  for (int64_t t = 0; t < s.shape[0]; ++t)
    for (int64_t g = 0; g < s.shape[1]; ++g) static_cast<float*>(s.data)[t * s.strides[0] + g * s.strides[1]] = 1e-30f;
  return 0;
}
