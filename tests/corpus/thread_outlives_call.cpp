// Threats 4 and 5, a thread that outlives the call: d2k_run starts a detached thread that computes
// the outputs and returns at once, so the timer sees an empty call and the work runs untimed.
// Caught: the worker counts its threads (/proc/self/task) before loading the solution and after
// every call: rejected, "left 1 thread(s) running after d2k_run returned".
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

#include <chrono>
#include <thread>

extern "C" int d2k_run(const d2k_call* call) {
  static d2k_call saved;
  saved = *call;  // the descriptors outlive the call in the worker; the thread reads them later
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    quantize(&saved);
  }).detach();
  return 0;
}
