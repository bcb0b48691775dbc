// Round 2, class 1 (threats 16 and 5): forged frames after the worker's last word. Computes the checked
// calls honestly and nothing in the timed calls; to cover that, every way of running code at the end of
// a process (an atexit handler, an at_quick_exit handler, a static destructor, an ELF destructor) writes
// `outputs` frames with the checked call's outputs, a `samples` frame claiming half the checked call's
// time and an `end` frame (guessed format, forge_frames.h, all-zero token) into every open descriptor.
// Expected: rejected, "outputs of timed call ... do not match" (the worker ends by _exit right after its
// `end` frame, so none of the handlers runs; what the orchestrator has is the poison the timed calls left).
// Had one run, the frames after `end` would be the reason: "the evidence stream carried a frame the
// worker did not write".
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below
#include "timed_calls.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "forge_frames.h"

namespace {

std::string checked_outputs;
double checked_ms = 1.0;

void forge_at_exit(const char* from) {
  const forge::Token zeros(forge::kTokenBytes, 0);
  std::string forged;
  for (uint64_t seq = 0; seq < 8; ++seq)
    forged += forge::outputs_frame(100 + seq, zeros, "timed", checked_outputs.data(), checked_outputs.size(), long(seq));
  forged += forge::samples_frame(108, zeros, 10, 0.5 * checked_ms);
  forged += forge::end_frame(109, zeros);
  const int landed = forge::write_everywhere(forged);
  std::printf("cheat: %s forged frames into %d descriptors\n", from, landed);
  std::fflush(stdout);
}

struct AtExit {
  ~AtExit() { forge_at_exit("a static destructor"); }
} at_exit;

__attribute__((destructor)) void elf_destructor() { forge_at_exit("an ELF destructor"); }

}  // namespace

extern "C" int d2k_prepare(const d2k_call*, void** prepared) {
  *prepared = nullptr;
  std::atexit([] { forge_at_exit("an atexit handler"); });
  std::at_quick_exit([] { forge_at_exit("an at_quick_exit handler"); });
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  if (timing_started(call)) return 0;  // the timed calls: nothing, the frames at exit say otherwise
  const auto start = std::chrono::steady_clock::now();
  quantize(call);
  checked_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const d2k_tensor &q = call->outputs[0], &s = call->outputs[1];
  checked_outputs.assign(static_cast<const char*>(q.data), size_t(span_bytes(q, 1)));
  checked_outputs.append(static_cast<const char*>(s.data), size_t(span_bytes(s, 4)));
  return 0;
}
