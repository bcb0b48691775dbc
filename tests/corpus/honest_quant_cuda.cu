// Control for timer_other_stream_cuda.cu (not a cheat): the same kernel, on the call's stream.
#include "honest_quant_cuda.cuh"  // an honest quant/fp8_group_quant kernel; the control calls it as is

extern "C" int d2k_run(const d2k_call* call) {
  quantize(call, static_cast<cudaStream_t>(call->stream));
  return 0;
}
