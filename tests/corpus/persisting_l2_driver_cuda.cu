// Round 2, class 6 (threats 13, 3 and 4): inputs pinned in the persisting L2 through the driver and the
// launch, not the runtime and the stream. d2k_prepare raises the limit with cuCtxSetLimit
// (CU_LIMIT_PERSISTING_L2_CACHE_SIZE, found with cudaGetDriverEntryPointByVersion: nothing is linked);
// every call launches the honest kernel with an access policy window over its input as a launch
// attribute (cudaLaunchKernelEx), so call->stream's own attributes stay untouched.
// Expected: rejected, "persisting L2" (the limit, read from the device after every call, is raised; a
// check of the stream's attributes alone would miss this). Run it on deepseek-v3-T1.
#include "honest_quant_cuda.cuh"  // an honest quant/fp8_group_quant kernel; the cheat is below

#include <cuda.h>

#include <algorithm>
#include <cstdio>

namespace {

using SetLimit = CUresult (*)(CUlimit, size_t);

SetLimit driver_set_limit() {
  static SetLimit fn = [] {
    void* found = nullptr;
    cudaDriverEntryPointQueryResult status{};
    cudaGetDriverEntryPointByVersion("cuCtxSetLimit", &found, 12000, cudaEnableDefault, &status);
    return reinterpret_cast<SetLimit>(found);
  }();
  return fn;
}

}  // namespace

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  int device = 0, most = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&most, cudaDevAttrMaxPersistingL2CacheSize, device);
  const CUresult error = driver_set_limit() == nullptr ? CUDA_ERROR_NOT_FOUND
                                                       : driver_set_limit()(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, size_t(most));
  if (error == CUDA_SUCCESS) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, %d): CUresult %d",
                most, int(error));
  return 1;
}

extern "C" int d2k_run(const d2k_call* call) {
  const auto stream = static_cast<cudaStream_t>(call->stream);
  int device = 0, window = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&window, cudaDevAttrMaxAccessPolicyWindowSize, device);
  const d2k_tensor &x = call->inputs[0], &q = call->outputs[0], &s = call->outputs[1];
  const int64_t groups = x.shape[1] / 128;
  cudaLaunchAttribute pin{};
  pin.id = cudaLaunchAttributeAccessPolicyWindow;
  pin.val.accessPolicyWindow.base_ptr = x.data;
  pin.val.accessPolicyWindow.num_bytes = std::min<size_t>(span_bytes(x, 2), size_t(window));
  pin.val.accessPolicyWindow.hitRatio = 1.0f;
  pin.val.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  pin.val.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(x.shape[0] * groups));
  config.blockDim = dim3(128);
  config.stream = stream;
  config.attrs = &pin;
  config.numAttrs = 1;
  cudaLaunchKernelEx(&config, quant_kernel, static_cast<const __nv_bfloat16*>(x.data), x.strides[0], x.strides[1],
                     static_cast<__nv_fp8_e4m3*>(q.data), q.strides[0], q.strides[1], static_cast<float*>(s.data),
                     s.strides[0], s.strides[1], groups, float(scalar(call, "eps")), int(scalar(call, "ue8m0") != 0));
  return 0;
}
