// sample/top_k_top_p returning the most probable token (greedy decoding): always in the kept set, so no
// single call is wrong, but the draws of the seeded calls are all the argmax. Caught on a smoke workload:
// incorrect_numerics, "do not follow the distribution".
#include "honest_sampler.h"

extern "C" int d2k_run(const d2k_call* call) {
  return sampler_run(call, [](uint64_t seed, int64_t row) { return sampler_uniform(seed, row); },
                     [](int64_t, int64_t, int64_t argmax) { return argmax; });
}
