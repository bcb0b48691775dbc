// Round 2, class 1 (threats 16 and 6): forged frames written during the calls, ahead of the worker's own
// frames for the same call. Computes every call honestly; in each timed call it then writes, in the
// guessed frame format (forge_frames.h) with a random token, an `outputs` frame carrying its outputs and a
// `samples` frame that claims a tenth of the time the call took, with the seq the worker's next frame would
// plausibly have (twice the call count), into every writable pipe; on the first timed call into every
// open descriptor as well.
// Expected: rejected, "the evidence stream carried a frame the worker did not write" (the token is
// wrong; the seq collides with the worker's next frame).
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below
#include "timed_calls.h"

#include <chrono>
#include <cstdio>
#include <random>

#include "forge_frames.h"

extern "C" int d2k_run(const d2k_call* call) {
  static int calls = 0, landed = 0;
  static forge::Token token;
  ++calls;
  const auto start = std::chrono::steady_clock::now();
  quantize(call);
  if (!timing_started(call)) return 0;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (token.empty()) {
    std::random_device random;
    for (size_t i = 0; i < forge::kTokenBytes; ++i) token.push_back(uint8_t(random()));
  }
  const uint64_t seq = 2 * uint64_t(calls);
  const d2k_tensor &q = call->outputs[0], &s = call->outputs[1];
  std::string payload(static_cast<const char*>(q.data), size_t(span_bytes(q, 1)));
  payload.append(static_cast<const char*>(s.data), size_t(span_bytes(s, 4)));
  std::string forged = forge::outputs_frame(seq, token, "checked", payload.data(), payload.size());
  forged += forge::samples_frame(seq + 1, token, 1, 0.1 * ms);
  const bool first = landed == 0;
  landed += forge::write_everywhere(forged);
  if (first) {
    landed += forge::write_everywhere(forged);
    std::printf("cheat: forged outputs and samples frames into %d descriptors\n", landed);
    std::fflush(stdout);
  }
  return 0;
}
