// Round 2, class 4 (threats 19 and 6): patches the clock through the GOT without mprotect: it writes
// only where a slot is writable as it is, which lazy binding leaves it (the first round's worker), and
// reports the others. Finds every GOT slot of clock_gettime, gettimeofday and std::chrono's
// steady_clock::now and system_clock::now in the worker and every library it loaded (got_patch.h) and
// points the writable ones at half-speed clocks (slow_clock.h). Every call computes honestly: only the
// samples are forged. When no slot was writable it fails with the list of read-only ones.
// Expected: with the worker linked full RELRO and BIND_NOW its own slots are read-only; but a system
// library loaded lazily keeps a writable .got.plt (libstdc++'s slot of clock_gettime, which
// steady_clock::now calls), so this still patches the worker's clock, and the outside clock has to catch
// it: rejected, "wall time" (use deepseek-v3-T4096, see patch_clock_got.cpp). Only if every slot is
// read-only: runtime_error, "the GOT slot is read-only".
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

#include <cstdio>
#include <string>

#include "slow_clock.h"

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  const slow::Outcome outcome = slow::patch(slow::host_targets(), /*with_mprotect=*/false);
  std::string refused;
  for (const std::string& one : outcome.refused) refused += one + "; ";
  std::printf("cheat: patched %d GOT slots of clock functions; read-only: %s\n", outcome.patched, refused.c_str());
  std::fflush(stdout);
  if (outcome.patched > 0) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "patched no GOT slot of a clock function: %s",
                refused.empty() ? "none was found" : refused.c_str());
  return 1;
}

extern "C" int d2k_run(const d2k_call* call) {
  quantize(call);
  return 0;
}
