// Threat 15, the GPU watchdog: on the one-row workload d2k_prepare launches a kernel that never ends
// and waits for it; on the others it does nothing and the expert d2k_run computes the answer. The
// hung workload must end as a timeout (its worker killed, the GPU context torn down with it), and the
// next workload must pass on the same GPU.
#include <cuda_runtime.h>

#include "d2k/solution.h"

__global__ void spin_forever(volatile int* flag) {
  while (*flag == 0) {
  }
}

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  if (call->num_inputs == 0 || call->inputs[0].shape[0] != 1) return 0;
  int* flag = nullptr;
  cudaMalloc(&flag, sizeof(int));
  cudaMemset(flag, 0, sizeof(int));
  spin_forever<<<1, 1>>>(flag);
  cudaDeviceSynchronize();  // never returns: the harness's timeout has to end it
  return 0;
}

extern "C" void d2k_release(void*) {}
