// sample/top_k_top_p drawing with a fixed seed instead of the call's: exact draws, the same ones every
// call. The repeat on one seed passes; the seeded calls, each with a fresh seed, repeat one another.
// Caught on a smoke workload: incorrect_numerics, the test naming draws that ignore the seed.
#include "honest_sampler.h"

extern "C" int d2k_run(const d2k_call* call) {
  return sampler_run(call, [](uint64_t, int64_t row) { return sampler_uniform(12345, row); },
                     [](int64_t, int64_t token, int64_t) { return token; });
}
