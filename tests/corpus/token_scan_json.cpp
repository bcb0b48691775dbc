// Round 2, class 2 (threats 16, 6 and 19): looks for the token in the process's own memory. In
// d2k_prepare and again at the first timed call it reads every readable mapping /proc/self/maps lists
// (memory_scan.h) and collects the value of every JSON key "token" and every run of exactly 32 hex
// digits (the request as the worker parsed it, a std::string copy, a buffer it formatted). It computes
// every call honestly; at the first timed call it writes, with each candidate token, a `samples` frame
// claiming a tenth of its time (guessed format, forge_frames.h, the seq of the worker's next frame as it
// guesses it) into every writable pipe. The log says how much it read and how many candidates it found.
// Expected: rejected, "the evidence stream carried a frame the worker did not write" (no candidate is the
// token, or, if one is, its frame's seq collides with the worker's next frame).
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below
#include "timed_calls.h"

#include <chrono>
#include <cstdio>
#include <set>
#include <string>

#include "forge_frames.h"
#include "memory_scan.h"

namespace {

std::set<std::string> candidates;
size_t scanned = 0;

void scan_for_tokens() {
  scanned += scan::each_chunk([](uintptr_t, const char* bytes, size_t n) { forge::token_candidates(bytes, n, candidates); });
}

}  // namespace

extern "C" int d2k_prepare(const d2k_call*, void** prepared) {
  *prepared = nullptr;
  scan_for_tokens();
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  static int calls = 0;
  static bool forged = false;
  ++calls;
  const auto start = std::chrono::steady_clock::now();
  quantize(call);
  if (!timing_started(call) || forged) return 0;
  forged = true;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  scan_for_tokens();
  int landed = 0, tried = 0;
  for (const std::string& hex : candidates) {
    forge::Token token;
    if (!forge::parse_token(hex, token) || ++tried > 64) continue;
    const std::string frame = forge::samples_frame(2 * uint64_t(calls), token, 1, 0.1 * ms);
    landed += forge::write_everywhere(frame);
  }
  std::printf("cheat: read %zu MiB of memory, found %zu token candidates; forged frames took in %d writes\n",
              scanned >> 20, candidates.size(), landed);
  std::fflush(stdout);
  return 0;
}
