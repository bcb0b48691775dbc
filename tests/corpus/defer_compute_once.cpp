// Threat 5, deferred work: computes on its first call only and returns at once from every later
// one, betting that only the first call's outputs are checked and the later ones only timed.
// Caught: outputs are poisoned before every checked call, and the first call made is the second
// draw, not the checked one: the correctness call (the first draw, third call) returns the poison:
// incorrect_numerics, "7168 of 7168 elements are NaN". Were the order different, the repeat of the
// second draw ("changed between two runs") or the timed calls' own oracles would catch it.
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

extern "C" int d2k_run(const d2k_call* call) {
  static bool done = false;
  if (done) return 0;
  done = true;
  quantize(call);
  return 0;
}
