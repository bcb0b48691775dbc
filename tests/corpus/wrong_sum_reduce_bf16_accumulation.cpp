// A hurried implementer's mistake (issue 11), not a cheat: moe/sum_reduce accumulating the experts'
// values in bf16 (vLLM's moe_sum order: a rounding after every add), an honest loop otherwise. Where the
// experts' outputs cancel the small terms are lost. Caught on the heavy-tailed smoke workload: elements
// far outside their bound: incorrect_numerics, "'out'".

#include "bf16_bits.h"
#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& x = call->inputs[0];
  const d2k_tensor& out = call->outputs[0];
  const float scale = static_cast<float>(call->scalars[0].f);
  const auto* in = static_cast<const uint16_t*>(x.data);
  auto* o = static_cast<uint16_t*>(out.data);
  for (int64_t t = 0; t < x.shape[0]; ++t) {
    for (int64_t h = 0; h < x.shape[2]; ++h) {
      uint16_t sum = 0;  // bf16 zero
      for (int64_t j = 0; j < x.shape[1]; ++j)
        sum = round_to_bf16(bf16_to_float(sum) + bf16_to_float(in[t * x.strides[0] + j * x.strides[1] + h * x.strides[2]]));
      o[t * out.strides[0] + h * out.strides[1]] = round_to_bf16(scale * bf16_to_float(sum));
    }
  }
  return 0;
}
