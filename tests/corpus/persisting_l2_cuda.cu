// Round 2, class 6 (threats 13, 3 and 4): inputs pinned in the persisting L2, where the harness's flush
// between samples cannot evict them. d2k_prepare raises the persisting-L2 limit to the device's maximum
// (cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize)); every call sets an access policy window over its
// input on call->stream (hit ratio 1, persisting) and runs the honest kernel, so each rotated copy's input
// stays in L2 from its first use on: cold-cache samples become warm ones. Refusals are its error.
// Expected: rejected, "persisting L2" (the worker set the limit to 0 and finds it raised after a call);
// run it on deepseek-v3-T1, where every copy's input fits in the set-aside part of L2.
#include "honest_quant_cuda.cuh"  // an honest quant/fp8_group_quant kernel; the cheat is below

#include <algorithm>
#include <cstdio>

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  int device = 0, most = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&most, cudaDevAttrMaxPersistingL2CacheSize, device);
  const cudaError_t error = cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, size_t(most));
  if (error == cudaSuccess) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, %d): %s", most,
                cudaGetErrorString(error));
  return 1;
}

extern "C" int d2k_run(const d2k_call* call) {
  const auto stream = static_cast<cudaStream_t>(call->stream);
  int device = 0, window = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&window, cudaDevAttrMaxAccessPolicyWindowSize, device);
  cudaStreamAttrValue pin{};
  pin.accessPolicyWindow.base_ptr = call->inputs[0].data;
  pin.accessPolicyWindow.num_bytes = std::min<size_t>(span_bytes(call->inputs[0], 2), size_t(window));
  pin.accessPolicyWindow.hitRatio = 1.0f;
  pin.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  pin.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &pin);
  quantize(call, stream);
  return 0;
}
