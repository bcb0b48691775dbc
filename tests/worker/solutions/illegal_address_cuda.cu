// Faults on the device: writes through a wild pointer. The worker must report the CUDA error by name
// and still write its result.
#include "d2k/solution.h"

__global__ void wild_write(float* p) { p[threadIdx.x * 1000003] = 1.0f; }

extern "C" int d2k_run(const d2k_call* call) {
  wild_write<<<1, 32, 0, static_cast<cudaStream_t>(call->stream)>>>(reinterpret_cast<float*>(0x1000));
  return 0;
}
