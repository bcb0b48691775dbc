// Round 2, class 1 on the GPU (threats 16 and 6): forged frames from d2k_release (see
// forge_frames_release.cpp), in a process that also holds the driver's descriptors (/dev/nvidia*, which
// refuse the bytes). Computes every call honestly and times its timed calls with events of its own; in
// d2k_release it writes a `samples` frame claiming half its median and an `end` frame (guessed format,
// forge_frames.h, all-zero token, a seq guessed from the number of calls) into every open descriptor.
// Expected: rejected, "the evidence stream carried a frame the worker did not write".
#include "honest_quant_cuda.cuh"  // an honest quant/fp8_group_quant kernel; the cheat is below
#include "timed_calls.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "forge_frames.h"

namespace {
std::vector<float> timed_ms;
int calls = 0;
}  // namespace

extern "C" int d2k_prepare(const d2k_call*, void** prepared) {
  *prepared = nullptr;  // only so that d2k_release is called
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  const auto stream = static_cast<cudaStream_t>(call->stream);
  ++calls;
  if (!timing_started(call)) {
    quantize(call, stream);
    return 0;
  }
  cudaEvent_t start, end;
  cudaEventCreate(&start);
  cudaEventCreate(&end);
  cudaEventRecord(start, stream);
  quantize(call, stream);
  cudaEventRecord(end, stream);
  cudaEventSynchronize(end);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, end);
  timed_ms.push_back(ms);
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  return 0;
}

extern "C" void d2k_release(void*) {
  std::vector<float> sorted = timed_ms;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0.01 : sorted[sorted.size() / 2];
  const forge::Token zeros(forge::kTokenBytes, 0);
  const uint64_t seq = uint64_t(calls) + 1;
  std::string forged = forge::samples_frame(seq, zeros, int(timed_ms.size()), 0.5 * median);
  forged += forge::end_frame(seq + 1, zeros);
  const int landed = forge::write_everywhere(forged);
  std::printf("cheat: forged samples of %.6f ms and an end frame into %d descriptors\n", 0.5 * median, landed);
  std::fflush(stdout);
}
