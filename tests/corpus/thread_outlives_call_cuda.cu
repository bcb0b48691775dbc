// Threats 4 and 5 on the GPU, a host thread that outlives the call: the kernel is launched from a
// detached thread a few milliseconds after d2k_run returned, outside every timed region.
// Caught: the worker counts its threads before loading the solution and after every call:
// rejected, "left 1 thread(s) running after d2k_run returned".
#include "honest_quant_cuda.cuh"  // an honest quant/fp8_group_quant kernel; the cheat is below

#include <chrono>
#include <thread>

extern "C" int d2k_run(const d2k_call* call) {
  static d2k_call saved;
  saved = *call;
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    quantize(&saved, static_cast<cudaStream_t>(saved.stream));
  }).detach();
  return 0;
}
