// Threat 3 on the GPU, caching by address: keeps each call's outputs in device memory keyed by the
// input pointer and copies them back (device to device) when it sees the pointer again.
// Caught: the second draw runs first in the same buffers: rejected, "outputs follow the addresses".
#include "honest_quant_cuda.cuh"  // an honest quant/fp8_group_quant kernel; the cheat is below

#include <map>

struct Cached {
  void* q = nullptr;
  void* s = nullptr;
};

extern "C" int d2k_run(const d2k_call* call) {
  static std::map<const void*, Cached> cache;
  const auto stream = static_cast<cudaStream_t>(call->stream);
  const d2k_tensor &q = call->outputs[0], &s = call->outputs[1];
  const size_t q_bytes = span_bytes(q, 1), s_bytes = span_bytes(s, 4);
  auto hit = cache.find(call->inputs[0].data);
  if (hit != cache.end()) {
    cudaMemcpyAsync(q.data, hit->second.q, q_bytes, cudaMemcpyDeviceToDevice, stream);
    cudaMemcpyAsync(s.data, hit->second.s, s_bytes, cudaMemcpyDeviceToDevice, stream);
    return 0;
  }
  quantize(call, stream);
  Cached saved;
  cudaMalloc(&saved.q, q_bytes);
  cudaMalloc(&saved.s, s_bytes);
  cudaMemcpyAsync(saved.q, q.data, q_bytes, cudaMemcpyDeviceToDevice, stream);
  cudaMemcpyAsync(saved.s, s.data, s_bytes, cudaMemcpyDeviceToDevice, stream);
  cache[call->inputs[0].data] = saved;
  return 0;
}
