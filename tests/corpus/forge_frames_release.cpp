// Round 2, class 1 (threats 16 and 6): forged frames from d2k_release, which runs after all evidence but
// before the worker's `end` frame. Computes every call honestly (so nothing but the forgery can be
// caught) and times its own timed calls; then writes, in the guessed frame format (forge_frames.h) with
// an all-zero token and a seq guessed from the number of calls it saw, a `samples` frame that claims half
// its real time and an `end` frame, into every open descriptor from 0 to 1023 and every one that
// /proc/self/fd lists.
// Expected: rejected, "the evidence stream carried a frame the worker did not write" (the token is
// wrong, the seq repeats or skips one, a second `end` follows the forged one).
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below
#include "timed_calls.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "forge_frames.h"

namespace {
std::vector<double> timed_ms;
int calls = 0;
}  // namespace

extern "C" int d2k_prepare(const d2k_call*, void** prepared) {
  *prepared = nullptr;  // only so that d2k_release is called
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  ++calls;
  const auto start = std::chrono::steady_clock::now();
  quantize(call);
  if (timing_started(call))
    timed_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

extern "C" void d2k_release(void*) {
  std::vector<double> sorted = timed_ms;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 1.0 : sorted[sorted.size() / 2];
  const forge::Token zeros(forge::kTokenBytes, 0);
  const uint64_t seq = uint64_t(calls) + 1;
  std::string forged = forge::samples_frame(seq, zeros, int(timed_ms.size()), 0.5 * median);
  forged += forge::end_frame(seq + 1, zeros);
  const int landed = forge::write_everywhere(forged);
  std::printf("cheat: forged samples of %.6f ms and an end frame into %d descriptors\n", 0.5 * median, landed);
  std::fflush(stdout);
}
