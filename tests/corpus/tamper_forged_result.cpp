// Threat 6, tampering with the harness from inside its process: on the first timed call it writes
// the worker's result.json itself, the outputs of the checked calls already on disk, with a plausible
// time (0.9 x what its own checked calls took, so above the speed-of-light floor: the floor alone
// would let it pass), then ends the process before the worker can write the real one.
// No file is evidence any more: the worker's results reach the orchestrator as frames on a pipe, each
// sent right after the call it describes. The file is ignored, and the process that ended during the
// timed calls has no timing to show: runtime_error, "(stage: timing)".
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

extern "C" int d2k_run(const d2k_call* call) {
  // The second draw, its repeat and the first draw are checked; the calls after them are timed.
  static int calls = 0;
  static double real_ms = 1e9;
  if (++calls <= 3) {
    const auto start = std::chrono::steady_clock::now();
    quantize(call);
    real_ms = std::min(real_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    return 0;
  }
  const double forged = 0.9 * real_ms;
  if (std::FILE* out = std::fopen("result.json", "w")) {
    std::fprintf(out,
                 "{\"status\": \"ok\", \"phase\": \"done\", \"message\": \"\", \"guard_violations\": [], "
                 "\"samples_ms\": [%.9g, %.9g, %.9g, %.9g, %.9g], \"rotation_sets\": 1}\n",
                 forged, forged, forged, forged, forged);
    std::fclose(out);
  }
  _exit(0);
}
