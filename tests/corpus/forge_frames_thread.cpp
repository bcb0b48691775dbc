// Round 2, class 1 (threats 16 and 4): forged frames from a thread of its own, which keeps writing while
// the worker runs, so that some frame of its lands between any two of the worker's. Computes every call
// honestly. The thread, started in d2k_prepare and never ended, writes every millisecond a `samples`
// frame claiming 1 us and an `end` frame (guessed format, forge_frames.h, all-zero token, an ever growing
// seq) into every writable pipe, and once into every open descriptor.
// Expected: rejected, "thread(s) running after d2k_prepare returned" (the kernel's thread count after
// every call into the solution); were the thread not counted, "the evidence stream carried a frame the
// worker did not write".
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

#include <chrono>
#include <thread>

#include "forge_frames.h"

namespace {

void forge_forever() {
  const forge::Token zeros(forge::kTokenBytes, 0);
  for (uint64_t seq = 0;; seq += 2) {
    std::string forged = forge::samples_frame(seq, zeros, 1, 0.001);
    forged += forge::end_frame(seq + 1, zeros);
    if (seq == 0) forge::write_everywhere(forged);
    for (int fd : forge::writable_pipes()) forge::write_all(fd, forged);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

extern "C" int d2k_prepare(const d2k_call*, void** prepared) {
  *prepared = nullptr;
  std::thread(forge_forever).detach();
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  quantize(call);
  return 0;
}
