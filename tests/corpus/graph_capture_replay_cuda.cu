// Round 2, class 6 (threats 6, 17 and 4): several timed calls captured in one CUDA graph that does the
// work once. Honest on the checked calls. Once timing starts, an odd timed call begins a capture
// (thread-local mode) on call->stream and launches its kernel into it, so nothing runs, and the worker's
// end-of-sample event and everything up to the next call are captured too; the next call ends the capture
// and launches the graph once, which runs one kernel and the harness's captured events back to back, and
// then computes nothing itself. Half the timed calls compute nothing and the other half replay a graph.
// Expected: a failure that names the capture ("stream capture left on after a call": rejected or
// runtime_error; or the worker's own synchronization or event query refused "while the stream is
// capturing"); had no check seen it, the sampled timed calls' outputs: rejected, "outputs of timed call
// ... do not match".
#include "honest_quant_cuda.cuh"  // an honest quant/fp8_group_quant kernel; the cheat is below
#include "timed_calls.h"

extern "C" int d2k_run(const d2k_call* call) {
  static long timed = 0;
  const auto stream = static_cast<cudaStream_t>(call->stream);
  if (!timing_started(call)) {
    quantize(call, stream);
    return 0;
  }
  if (++timed % 2 == 1) {
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      quantize(call, stream);
      return 0;
    }
    quantize(call, stream);  // captured, not run
    return 0;
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph != nullptr &&
      cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
    cudaGraphLaunch(exec, stream);
    cudaGraphExecDestroy(exec);
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  return 0;
}
