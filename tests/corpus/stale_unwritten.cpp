// Threat 1, stale memory: writes nothing and returns success, betting that the output buffers still
// hold the answer from an earlier computation (the reference's freed result, or a previous call's).
// Caught: outputs are poisoned (NaN, -1) before every call and the reference never runs in the
// worker, so what is left unwritten is poison: incorrect_numerics, "NaN".
#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) { return 0; }
