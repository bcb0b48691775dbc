// Threat 4, work on another stream: launches the kernel on a stream of its own, which the events
// the timer records on the call's stream do not wait for, and returns.
// Defeated: the timer synchronizes the whole device inside the timed region and charges a sample
// its host wall time when that exceeds the event time: it passes, with the time of the honest
// launch (honest_quant_cuda.cu), not less.
#include "honest_quant_cuda.cuh"  // an honest quant/fp8_group_quant kernel; the cheat is below

extern "C" int d2k_run(const d2k_call* call) {
  static cudaStream_t hidden = nullptr;
  if (hidden == nullptr) cudaStreamCreateWithFlags(&hidden, cudaStreamNonBlocking);
  quantize(call, hidden);
  return 0;
}
