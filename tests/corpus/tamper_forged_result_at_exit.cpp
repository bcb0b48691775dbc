// Threat 6, after the worker's last word: every timed call fails, so the worker's own result.json says
// runtime_error; an atexit handler and a static destructor then rewrite it with status ok and 0.9 x
// the time its checked calls took (the outputs of the checked calls are on disk). Were either to run
// after the worker's last write, the trace would pass with the forged time.
// Caught by the worker's end: it leaves by _exit right after its `end` frame, so neither runs, and no
// file is evidence anyway (frames on a pipe are): runtime_error, "d2k_run returned 1: every timed call
// fails".
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

static double real_ms = 1e9;

static void forge() {
  const double forged = 0.9 * real_ms;
  if (std::FILE* out = std::fopen("result.json", "w")) {
    std::fprintf(out,
                 "{\"status\": \"ok\", \"phase\": \"done\", \"message\": \"\", \"guard_violations\": [], "
                 "\"samples_ms\": [%.9g, %.9g, %.9g, %.9g, %.9g], \"rotation_sets\": 1}\n",
                 forged, forged, forged, forged, forged);
    std::fclose(out);
  }
}

__attribute__((destructor)) static void forge_at_unload() { forge(); }

extern "C" int d2k_run(const d2k_call* call) {
  // The second draw, its repeat and the first draw are checked; the calls after them are timed.
  static int calls = 0;
  if (++calls == 1) std::atexit(forge);
  if (calls <= 3) {
    const auto start = std::chrono::steady_clock::now();
    quantize(call);
    real_ms = std::min(real_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    return 0;
  }
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "every timed call fails; the result is forged at exit");
  return 1;
}
