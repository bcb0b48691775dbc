// Threat 1 on the GPU, stale device memory: copies whatever a fresh device allocation holds into the
// outputs, betting that the allocator hands back memory that held the answer (the reference's freed
// result, in a harness that computes it in the same process).
// Caught: the reference never runs in the worker process, and the outputs are poisoned before every
// call: incorrect_numerics.
#include <cstdint>

#include "d2k/solution.h"

[[maybe_unused]] static size_t span_bytes(const d2k_tensor& t, size_t element) {
  int64_t last = 0;
  for (int d = 0; d < t.rank; ++d) last += (t.shape[d] - 1) * t.strides[d];
  return size_t(last + 1) * element;
}

extern "C" int d2k_run(const d2k_call* call) {
  const auto stream = static_cast<cudaStream_t>(call->stream);
  for (int i = 0; i < call->num_outputs; ++i) {
    const d2k_tensor& out = call->outputs[i];
    const size_t bytes = span_bytes(out, out.dtype == D2K_FLOAT32 ? 4 : 1);
    void* stale = nullptr;
    if (cudaMalloc(&stale, bytes) != cudaSuccess) return 1;
    cudaMemcpyAsync(out.data, stale, bytes, cudaMemcpyDeviceToDevice, stream);
    cudaStreamSynchronize(stream);
    cudaFree(stale);
  }
  return 0;
}
