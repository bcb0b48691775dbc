// Round 2, class 1 (threat 16): forged evidence without knowing the frame format. Computes every call
// honestly; on the first timed call and in d2k_release it writes into every open descriptor from 0 to
// 1023 and every one /proc/self/fd lists what a harness might take for a result: its outputs as raw bytes,
// a result.json-like text that says ok with fast samples, and a run of 0xFF bytes (a length field that
// claims a huge payload, to swallow whatever the worker writes next).
// Expected: rejected, "the evidence stream carried a frame the worker did not write" (no magic, no
// token: the stream is not frames any more after the first forged byte).
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below
#include "timed_calls.h"

#include <chrono>
#include <cstdio>
#include <string>

#include "forge_frames.h"

namespace {

std::string last_outputs;
double last_ms = 1.0;

void forge_raw(const char* from) {
  char text[512];
  std::snprintf(text, sizeof text,
                "{\"status\": \"ok\", \"phase\": \"done\", \"message\": \"\", \"samples_ms\": [%.9g, %.9g, %.9g]}\n",
                0.1 * last_ms, 0.1 * last_ms, 0.1 * last_ms);
  const int landed = forge::write_everywhere(last_outputs) + forge::write_everywhere(text) +
                     forge::write_everywhere(std::string(64, '\xFF'));
  std::printf("cheat: raw forgeries from %s took in %d writes\n", from, landed);
  std::fflush(stdout);
}

}  // namespace

extern "C" int d2k_prepare(const d2k_call*, void** prepared) {
  *prepared = nullptr;  // only so that d2k_release is called
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  static bool forged = false;
  const auto start = std::chrono::steady_clock::now();
  quantize(call);
  last_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const d2k_tensor &q = call->outputs[0], &s = call->outputs[1];
  last_outputs.assign(static_cast<const char*>(q.data), size_t(span_bytes(q, 1)));
  last_outputs.append(static_cast<const char*>(s.data), size_t(span_bytes(s, 4)));
  if (timing_started(call) && !forged) {
    forged = true;
    forge_raw("the first timed call");
  }
  return 0;
}

extern "C" void d2k_release(void*) { forge_raw("d2k_release"); }
