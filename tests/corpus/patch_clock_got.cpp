// Round 2, class 4 (threats 19 and 6): patches the worker's clock through its GOT, with mprotect. In
// d2k_prepare it finds every GOT slot of clock_gettime, gettimeofday and std::chrono's steady_clock::now
// and system_clock::now in the worker and every library it loaded (got_patch.h), makes each read-only
// page writable again with mprotect (full RELRO does not stop that) and points the slots at clocks that
// run at half speed (slow_clock.h). Every call computes honestly: only the samples are forged, each half
// the real time. Slots it could not patch, or none found, are its error.
// Expected: rejected, by the outside clock: the reported samples do not explain the wall time the timing
// loop took, measured by the orchestrator (fragment "wall time"). Needs a workload whose call outweighs
// the per-call overhead (the cpu device's cache flush takes milliseconds): deepseek-v3-T4096. (If
// seccomp refused mprotect: runtime_error, "Operation not permitted".)
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

#include <cstdio>
#include <string>

#include "slow_clock.h"

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  const slow::Outcome outcome = slow::patch(slow::host_targets(), /*with_mprotect=*/true);
  std::string refused;
  for (const std::string& one : outcome.refused) refused += one + "; ";
  std::printf("cheat: patched %d GOT slots of clock functions; refused: %s\n", outcome.patched, refused.c_str());
  std::fflush(stdout);
  if (outcome.patched > 0 && refused.empty()) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "patched %d GOT slots of clock functions; refused: %s",
                outcome.patched, refused.empty() ? "none, but none was found" : refused.c_str());
  return 1;
}

extern "C" int d2k_run(const d2k_call* call) {
  quantize(call);
  return 0;
}
