// Threat 6 on the GPU: forges the worker's result.json on the first timed call, with 0.9 x the time
// its own checked calls took (launch and synchronization included, so above the speed-of-light
// floor), and ends the process (see tamper_forged_result.cpp).
// No file is evidence (frames on a pipe are): the file is ignored and the process that ended during
// the timed calls has no timing to show: runtime_error, "(stage: timing)".
#include "honest_quant_cuda.cuh"  // an honest quant/fp8_group_quant kernel; the cheat is below

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

extern "C" int d2k_run(const d2k_call* call) {
  static int calls = 0;
  static double real_ms = 1e9;
  if (++calls <= 3) {
    const auto start = std::chrono::steady_clock::now();
    quantize(call, static_cast<cudaStream_t>(call->stream));
    cudaStreamSynchronize(static_cast<cudaStream_t>(call->stream));
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
