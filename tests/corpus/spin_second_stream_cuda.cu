// Round 2, class 6 (threats 4, 5 and 18): a kernel that never ends does the work, d2k_run does none.
// d2k_prepare launches a persistent kernel (spinner_cuda.cuh, one block per SM, a 20 s budget) on a
// non-blocking stream of its own, reading a mailbox in mapped pinned memory. The checked calls compute
// honestly; once timing starts, a call only names its tensors in the mailbox (host stores, nothing to
// time) and returns, and the spinner rewrites the outputs of the latest call over and over.
// Expected: timeout, "timed out" (run with --timeout 5: the worker synchronizes the whole device after
// every call into the solution, d2k_prepare first, and the spinner does not end); were only the stream
// synchronized, a no-op call (the solution not called) would find its outputs rewritten: rejected.
#include "honest_quant_cuda.cuh"  // an honest quant/fp8_group_quant kernel; the cheat is below
#include "spinner_cuda.cuh"
#include "timed_calls.h"

#include <cstdio>

namespace {
Mailbox* mailbox = nullptr;  // mapped pinned host memory
}

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaStream_t own = nullptr;
  cudaError_t error = cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking);
  if (error == cudaSuccess) error = cudaHostAlloc(reinterpret_cast<void**>(&mailbox), sizeof(Mailbox), cudaHostAllocMapped);
  if (error == cudaSuccess) {
    std::memset(mailbox, 0, sizeof(Mailbox));
    spin<<<unsigned(sms), 128, 0, own>>>(mailbox, 20ULL * 1000 * 1000 * 1000);
    error = cudaGetLastError();
  }
  if (error == cudaSuccess) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "no spinner: %s", cudaGetErrorString(error));
  return 1;
}

extern "C" int d2k_run(const d2k_call* call) {
  if (!timing_started(call)) {
    quantize(call, static_cast<cudaStream_t>(call->stream));
    return 0;
  }
  publish(mailbox, call);
  return 0;
}
