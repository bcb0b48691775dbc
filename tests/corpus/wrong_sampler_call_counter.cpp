// sample/top_k_top_p ignoring the seed for a count of its calls: fresh, exact draws on every call, so the
// distribution test passes, but the same seed twice gives other tokens. Caught by the deterministic repeat
// (the second draw run twice): rejected, "changed between two runs on the same inputs".
#include "honest_sampler.h"

static uint64_t calls = 0;

extern "C" int d2k_run(const d2k_call* call) {
  const uint64_t stream = ++calls;
  return sampler_run(call, [&](uint64_t, int64_t row) { return sampler_uniform(777, row, stream); },
                     [](int64_t, int64_t token, int64_t) { return token; });
}
