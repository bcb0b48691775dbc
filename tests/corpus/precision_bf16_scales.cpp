// Threat 7, lower precision: keeps the scales in bf16 (8 bits of mantissa) where the task asks for
// fp32, which halves nothing worth having and loses 16 bits.
// Caught: the scales' tolerance (rtol 1e-6) admits a correctly rounded fp32 quotient only:
// incorrect_numerics, "'scales'".
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

extern "C" int d2k_run(const d2k_call* call) {
  quantize(call);
  const d2k_tensor& s = call->outputs[1];
  for (int64_t t = 0; t < s.shape[0]; ++t) {
    for (int64_t g = 0; g < s.shape[1]; ++g) {
      float& scale = static_cast<float*>(s.data)[t * s.strides[0] + g * s.strides[1]];
      uint32_t bits;
      std::memcpy(&bits, &scale, 4);
      bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000u;
      std::memcpy(&scale, &bits, 4);
    }
  }
  return 0;
}
