// Round 2, class 6 (threats 6, 4 and 17): leaves the harness's stream capturing into a CUDA graph, so that
// what the worker enqueues on it afterwards (the timer's events, the cache flush) is captured, not run,
// and the timer reads events that were recorded long ago. Honest on the checked calls; the first timed
// call computes, then begins a capture (relaxed mode, which lets the worker's other calls through) on
// call->stream and returns; every later call finds the stream capturing and does nothing.
// Expected: a failure that names the capture ("stream capture left on after a call": rejected or
// runtime_error; or the worker's own synchronization or event query refused "while the stream is
// capturing"). Never passed.
#include "honest_quant_cuda.cuh"  // an honest quant/fp8_group_quant kernel; the cheat is below
#include "timed_calls.h"

extern "C" int d2k_run(const d2k_call* call) {
  const auto stream = static_cast<cudaStream_t>(call->stream);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(stream, &status);
  if (status == cudaStreamCaptureStatusActive) return 0;  // the worker's work is being captured, not run
  quantize(call, stream);
  if (timing_started(call)) cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
  return 0;
}
