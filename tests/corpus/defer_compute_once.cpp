// Threat 5, deferred work: computes on its first call only and returns at once from every later
// one, betting that only the first call's outputs are checked and the later ones only timed.
// Caught: outputs are poisoned before every checked call (the second draw, its repeat, the first
// draw, the timed calls), and the first call made is not the only one checked: the repeat of the
// second draw leaves the poison where the first run wrote values: rejected, "changed between two runs
// on the same inputs".
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

extern "C" int d2k_run(const d2k_call* call) {
  static bool done = false;
  if (done) return 0;
  done = true;
  quantize(call);
  return 0;
}
