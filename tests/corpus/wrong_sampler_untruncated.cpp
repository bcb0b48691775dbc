// sample/top_k_top_p ignoring top-k and top-p: an exact draw from the whole row. Caught on the checked call
// of a smoke workload: incorrect_numerics, a token "outside its allowed set".
#include "honest_sampler.h"

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& probs = call->inputs[0];
  const uint64_t seed = sampler_seed(call);
  auto* out = static_cast<int64_t*>(call->outputs[0].data);
  for (int64_t b = 0; b < probs.shape[0]; ++b)
    out[b] = sampler_row(static_cast<const float*>(probs.data) + b * probs.strides[0], probs.shape[1], 0, 1.0,
                         sampler_uniform(seed, b));
  return 0;
}
