// Round 2, class 3 on the GPU (threat 17): compute the checked calls, replay afterwards, counting calls
// (see replay_call_count.cpp). The first three calls compute honestly and the third's outputs are kept in
// device memory of its own; every later call copies them into its outputs, device to device, a third of
// the bytes an honest call moves.
// Expected: rejected, "outputs of timed call ... do not match" (every timed call's inputs carry a fresh
// patch; a sample of timed calls is checked against its own oracle). With the first round's worker (on
// the H200, moe/topk_softmax in this way passed at 1.6x the expert): passed.
#include "honest_quant_cuda.cuh"  // an honest quant/fp8_group_quant kernel; the cheat is below

extern "C" int d2k_run(const d2k_call* call) {
  static int calls = 0;
  static void *kept_q = nullptr, *kept_s = nullptr;
  const auto stream = static_cast<cudaStream_t>(call->stream);
  const d2k_tensor &q = call->outputs[0], &s = call->outputs[1];
  const size_t q_bytes = span_bytes(q, 1), s_bytes = span_bytes(s, 4);
  if (++calls <= 3 || kept_q == nullptr) {
    quantize(call, stream);
    if (kept_q == nullptr && (cudaMalloc(&kept_q, q_bytes) != cudaSuccess || cudaMalloc(&kept_s, s_bytes) != cudaSuccess)) {
      kept_q = nullptr;
      return 0;
    }
    cudaMemcpyAsync(kept_q, q.data, q_bytes, cudaMemcpyDeviceToDevice, stream);
    cudaMemcpyAsync(kept_s, s.data, s_bytes, cudaMemcpyDeviceToDevice, stream);
    return 0;
  }
  cudaMemcpyAsync(q.data, kept_q, q_bytes, cudaMemcpyDeviceToDevice, stream);
  cudaMemcpyAsync(s.data, kept_s, s_bytes, cudaMemcpyDeviceToDevice, stream);
  return 0;
}
