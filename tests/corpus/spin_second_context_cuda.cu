// Round 2, class 6 (threats 4, 5 and 18): a kernel that never ends, in a second context, does the work.
// d2k_prepare creates a context of its own (cuCtxCreate, found with cudaGetDriverEntryPointByVersion:
// nothing is linked) and launches in it a persistent kernel (spinner_cuda.cuh, one block per SM, a 20 s
// budget) reading a mailbox in mapped pinned, portable memory. A device-wide synchronization of the
// worker's context does not wait for another context's kernel. The checked calls compute honestly; once
// timing starts, a call only names its tensors in the mailbox and returns, and the spinner rewrites the
// outputs of the latest call over and over, outside every timed region.
// Expected: rejected, "outputs of timed call ... do not match" (the other context cannot write the
// worker's buffers, its kernel faults there, or is not done when the outputs are read); if it could, a
// no-op call (the solution not called) finds its outputs rewritten: rejected, naming the no-op call; and
// the CUPTI clock sees the spinner's kernel. Never passed. On the H200 (2026-12-01) the first finding is
// the thread the driver starts with the new context, still running when d2k_prepare returns: rejected,
// "left 1 thread(s) running after d2k_prepare returned".
#include "honest_quant_cuda.cuh"  // an honest quant/fp8_group_quant kernel; the cheat is below
#include "spinner_cuda.cuh"
#include "timed_calls.h"

#include <cuda.h>

#include <cstdio>
#include <string>

namespace {

Mailbox* mailbox = nullptr;  // mapped pinned host memory, portable to every context

template <typename Fn>
Fn driver(const char* name, unsigned version) {
  void* found = nullptr;
  cudaDriverEntryPointQueryResult status{};
  cudaGetDriverEntryPointByVersion(name, &found, version, cudaEnableDefault, &status);
  return reinterpret_cast<Fn>(found);
}

// A context of its own on the worker's device: cuCtxCreate_v4 where the driver has it, else _v2.
CUresult create_context(CUcontext* context, CUdevice device) {
  using CreateV4 = CUresult (*)(CUcontext*, CUctxCreateParams*, unsigned, CUdevice);
  using CreateV2 = CUresult (*)(CUcontext*, unsigned, CUdevice);
  if (auto v4 = driver<CreateV4>("cuCtxCreate", 13000)) return v4(context, nullptr, 0, device);
  if (auto v2 = driver<CreateV2>("cuCtxCreate", 12000)) return v2(context, 0, device);
  return CUDA_ERROR_NOT_FOUND;
}

}  // namespace

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  using Pop = CUresult (*)(CUcontext*);
  const auto pop = driver<Pop>("cuCtxPopCurrent", 12000);
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  CUcontext own = nullptr;
  std::string failed;
  if (pop == nullptr) {
    failed = "no cuCtxPopCurrent";
  } else if (const CUresult created = create_context(&own, CUdevice(device)); created != CUDA_SUCCESS) {
    failed = "cuCtxCreate: CUresult " + std::to_string(int(created));
  } else {
    // cuCtxCreate made it current; the runtime's calls below go to it.
    cudaStream_t stream = nullptr;
    cudaError_t error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (error == cudaSuccess)
      error = cudaHostAlloc(reinterpret_cast<void**>(&mailbox), sizeof(Mailbox), cudaHostAllocMapped | cudaHostAllocPortable);
    if (error == cudaSuccess) {
      std::memset(mailbox, 0, sizeof(Mailbox));
      spin<<<unsigned(sms), 128, 0, stream>>>(mailbox, 20ULL * 1000 * 1000 * 1000);
      error = cudaGetLastError();
    }
    CUcontext popped = nullptr;
    pop(&popped);  // the worker's context is current again
    if (error != cudaSuccess) failed = std::string("the spinner in its own context: ") + cudaGetErrorString(error);
  }
  if (failed.empty()) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "no second context: %s", failed.c_str());
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
