// Round 2, class 3 (threat 17): replays only every other timed call, so that half the calls are right
// and a check of one call at random passes half the time; the median of the samples halves too. Honest
// on the checked calls; once timing starts (timed_calls.h), odd timed calls compute and keep their
// outputs, even ones copy the last kept outputs.
// Expected: rejected, "outputs of timed call ... do not match" (the worker sends the outputs of several
// timed calls chosen at random after each call, and of the last one: all of them land on computed calls
// with probability 2^-(number sent), about 6% for four; the seed of CI's run decides which).
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below
#include "timed_calls.h"

#include <string>

extern "C" int d2k_run(const d2k_call* call) {
  static long timed = 0;
  static std::string q_bytes, s_bytes;
  const d2k_tensor &q = call->outputs[0], &s = call->outputs[1];
  if (timing_started(call) && ++timed % 2 == 0 && !q_bytes.empty()) {
    std::memcpy(q.data, q_bytes.data(), q_bytes.size());
    std::memcpy(s.data, s_bytes.data(), s_bytes.size());
    return 0;
  }
  quantize(call);
  q_bytes.assign(static_cast<const char*>(q.data), size_t(span_bytes(q, 1)));
  s_bytes.assign(static_cast<const char*>(s.data), size_t(span_bytes(s, 4)));
  return 0;
}
