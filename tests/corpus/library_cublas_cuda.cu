// Threat 11 on the GPU, a library the task does not allow: calls cuBLAS (its header is in the CUDA
// toolkit's include folder, so this compiles). Caught: the solution links nothing but the CUDA
// runtime, and the worker does not load cuBLAS, so the symbol cannot be resolved when the solution is
// loaded: runtime_error, "undefined symbol".
#include <cublas_v2.h>

#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  static cublasHandle_t handle = nullptr;
  if (handle == nullptr && cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasSetStream(handle, static_cast<cudaStream_t>(call->stream));
  return 0;
}
