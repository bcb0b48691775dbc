// Round 2, class 6 (threats 4, 5 and 18): the kernel never does the work; a host thread does, through
// mapped pinned memory, between the calls. d2k_prepare starts a thread of its own (with its own stream)
// that watches every rotated copy of the tensors a timed call has used: when a copy's outputs turn to
// poison (the worker prepares it for its next call), the thread copies its inputs into mapped pinned
// memory, quantizes them on the CPU (honest_quant.h) and copies the outputs back, all before the call. In
// a timed call d2k_run launches a kernel that does nothing (the timeline shows a kernel of the solution's)
// and returns. The checked calls are computed the same way on the CPU, inside the call.
// Expected: rejected, "thread(s) running after d2k_prepare returned" (the kernel's count of the process's
// threads after every call into the solution); were the thread not seen, a no-op call (the solution not
// called) would find its outputs rewritten, and CUPTI would time a kernel of nothing.
#include "honest_quant.h"  // an honest quant/fp8_group_quant on the CPU; the cheat is below
#include "timed_calls.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

namespace {

constexpr int kMaxCopies = 256;

struct Copy {
  d2k_tensor input, outputs[2];
};

Copy copies[kMaxCopies];
std::atomic<int> known{0};
d2k_scalar scalars[8];
int num_scalars = 0;
int64_t x_bytes = 0, q_bytes = 0, s_bytes = 0;

struct Stage {  // mapped pinned memory: one for the calls, one for the thread
  char *x = nullptr, *q = nullptr, *s = nullptr;
};
Stage for_calls, for_thread;

__global__ void does_nothing(const int* never) {
  if (never != nullptr && *never == 0x7fffffff) __trap();
}

// Copies the inputs in, quantizes them on the CPU and copies the outputs out, on `stream`.
void compute_on_host(const Copy& copy, const Stage& stage, cudaStream_t stream) {
  cudaMemcpyAsync(stage.x, copy.input.data, size_t(x_bytes), cudaMemcpyDeviceToHost, stream);
  cudaStreamSynchronize(stream);
  d2k_tensor input = copy.input, outputs[2] = {copy.outputs[0], copy.outputs[1]};
  input.data = stage.x;
  outputs[0].data = stage.q;
  outputs[1].data = stage.s;
  d2k_call call{};
  call.inputs = &input;
  call.num_inputs = 1;
  call.outputs = outputs;
  call.num_outputs = 2;
  call.scalars = scalars;
  call.num_scalars = num_scalars;
  quantize(&call);
  cudaMemcpyAsync(copy.outputs[0].data, stage.q, size_t(q_bytes), cudaMemcpyHostToDevice, stream);
  cudaMemcpyAsync(copy.outputs[1].data, stage.s, size_t(s_bytes), cudaMemcpyHostToDevice, stream);
  cudaStreamSynchronize(stream);
}

void watch() {
  cudaStream_t own = nullptr;
  cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking);
  uint32_t* peek = nullptr;
  cudaHostAlloc(reinterpret_cast<void**>(&peek), sizeof(uint32_t), cudaHostAllocMapped);
  for (;;) {
    for (int i = 0; i < known.load(); ++i) {
      cudaMemcpyAsync(peek, copies[i].outputs[1].data, 4, cudaMemcpyDeviceToHost, own);
      cudaStreamSynchronize(own);
      if (*peek == 0xFFFFFFFF) compute_on_host(copies[i], for_thread, own);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

Copy copy_of(const d2k_call* call) { return {call->inputs[0], {call->outputs[0], call->outputs[1]}}; }

cudaError_t allocate(Stage& stage) {
  cudaError_t error = cudaHostAlloc(reinterpret_cast<void**>(&stage.x), size_t(x_bytes), cudaHostAllocMapped);
  if (error == cudaSuccess) error = cudaHostAlloc(reinterpret_cast<void**>(&stage.q), size_t(q_bytes), cudaHostAllocMapped);
  if (error == cudaSuccess) error = cudaHostAlloc(reinterpret_cast<void**>(&stage.s), size_t(s_bytes), cudaHostAllocMapped);
  return error;
}

}  // namespace

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  x_bytes = span_bytes(call->inputs[0], 2);
  q_bytes = span_bytes(call->outputs[0], 1);
  s_bytes = span_bytes(call->outputs[1], 4);
  cudaError_t error = allocate(for_calls);
  if (error == cudaSuccess) error = allocate(for_thread);
  if (error != cudaSuccess) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "no mapped pinned memory: %s", cudaGetErrorString(error));
    return 1;
  }
  num_scalars = call->num_scalars < 8 ? call->num_scalars : 8;
  for (int i = 0; i < num_scalars; ++i) scalars[i] = call->scalars[i];
  std::thread(watch).detach();
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  const auto stream = static_cast<cudaStream_t>(call->stream);
  if (timing_started(call)) {
    const int n = known.load();
    for (int i = 0; i < n; ++i) {
      if (copies[i].input.data != call->inputs[0].data) continue;
      does_nothing<<<1, 32, 0, stream>>>(nullptr);
      return 0;
    }
    if (n < kMaxCopies) {
      copies[n] = copy_of(call);
      known.store(n + 1);
    }
  }
  compute_on_host(copy_of(call), for_calls, stream);
  return 0;
}
