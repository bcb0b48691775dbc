// Round 2, class 3 (threat 17): compute the checked calls, replay afterwards, counting calls. The first
// three calls (the second draw, its repeat, the first draw: the checked ones) compute honestly and the
// third's outputs are kept in a static; every later call copies them into its outputs and returns.
// Expected: rejected, "outputs of timed call ... do not match" (every timed call's inputs carry a fresh
// patch the solution cannot predict, and a sample of timed calls is checked against its own oracle).
// With the first round's worker, timed calls ran on the checked call's bytes: passed.
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

#include <string>

extern "C" int d2k_run(const d2k_call* call) {
  static int calls = 0;
  static std::string q_bytes, s_bytes;
  const d2k_tensor &q = call->outputs[0], &s = call->outputs[1];
  if (++calls <= 3) {
    quantize(call);
    q_bytes.assign(static_cast<const char*>(q.data), size_t(span_bytes(q, 1)));
    s_bytes.assign(static_cast<const char*>(s.data), size_t(span_bytes(s, 4)));
    return 0;
  }
  std::memcpy(q.data, q_bytes.data(), q_bytes.size());
  std::memcpy(s.data, s_bytes.data(), s_bytes.size());
  return 0;
}
