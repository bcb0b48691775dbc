// sample/top_k_top_p biased toward the argmax by a few percent: an exact draw, except that 5% of the time
// (decided by a second uniform of the same seed and row) the row's most probable token instead. Every call
// in the kept sets, deterministic in the seed. Caught on a smoke workload: incorrect_numerics, the test
// naming a bias toward the argmax.
#include "honest_sampler.h"

extern "C" int d2k_run(const d2k_call* call) {
  const uint64_t seed = sampler_seed(call);
  return sampler_run(call, [](uint64_t s, int64_t row) { return sampler_uniform(s, row); },
                     [seed](int64_t row, int64_t token, int64_t argmax) {
                       return sampler_uniform(seed, row, 99) < 0.05 ? argmax : token;
                     });
}
