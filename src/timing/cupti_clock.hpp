// A second clock, outside the solution's code path (issue 10): CUPTI's activity records of the device
// work that ran while a timed call was under way. The event timer brackets the call with events on
// its stream; this clock reads what the GPU itself reported for every kernel, copy and memset, on any
// stream or context. The two must agree: a window whose kernels were busy longer than the events say
// means the events lied (or were recorded into a graph); kernels on another stream or context, or a
// context the solution made, mean work the events did not bracket. Only with D2K_WITH_CUDA.
//
// What enabling it costs (tests/timing/test_cupti_clock_gpu.cpp, CuptiClockGpu.CostPerLaunch, prints
// the numbers on the machine it runs on): CUPTI instruments every kernel to take its start and end on
// the GPU, and hands each launch's record to its own worker thread. The test measures, for back-to-back
// launches of an empty kernel, the host time of a launch and the GPU time per kernel with the clock on
// and off; the lead records the H200's figures here and decides from them whether the clock runs in the
// main timing loop or in a short verification loop after it.
#pragma once

#ifdef D2K_WITH_CUDA
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace d2k {

// One window: one timed call as the device saw it. Times are CUPTI's (ns, the clock of
// cuptiGetTimestamp and of the records).
struct KernelWindow {
  uint64_t begin_ns = 0;           // begin_window()
  uint64_t end_ns = 0;             // end_window()
  uint64_t busy_ns = 0;            // the union of the intervals of the solution's work that started in it
  uint64_t first_start_ns = 0;     // earliest start of that work (0 when there was none)
  uint64_t last_end_ns = 0;        // latest end of it: past end_ns means end_window came too early
  int kernels = 0;                 // the solution's kernels that started in the window
  int copies = 0;                  // memcpy and memset operations that started in it
  int other_stream = 0;            // of kernels and copies, those not on the window's stream
  int other_context = 0;           // those not on the context current when the clock started
  int harness_kernels = 0;         // kernels named with the harness's prefix: left out of all the above
  std::vector<std::string> other_stream_names;  // names of the kernels on other streams or contexts
};

struct KernelClockReport {
  std::vector<KernelWindow> windows;  // in the order they were opened
  // Kernels of the solution's (not the harness's prefix) that started after the first window opened
  // and in no window: device work begun between the timed calls.
  int kernels_between_windows = 0;
  // Contexts created after the clock started, as "context <id> on device <n>"; the harness's is the one
  // current at start, so any entry here is the solution's.
  std::vector<std::string> contexts_created;
};

// Records the device work of the current CUDA context (and any other) from construction to
// destruction. One at a time per process: CUPTI allows a single subscriber. Construct it during the
// worker's set-up: CUPTI starts a worker thread of its own, which must be counted in the worker's
// baseline of threads (worker/threads.hpp), and it must exist before the seccomp filter.
class KernelClock {
 public:
  // `harness_prefix`: kernels whose (mangled) name starts with it are the harness's own (the L2 flush,
  // the comparisons: all in namespace d2k, "_ZN3d2k"). They are counted apart, never as the solution's.
  // Throws d2k::Error when CUPTI cannot be set up (another subscriber, no context current).
  explicit KernelClock(std::string harness_prefix);
  ~KernelClock();
  KernelClock(const KernelClock&) = delete;
  KernelClock& operator=(const KernelClock&) = delete;

  // Brackets one timed call; `stream` is the call's. Call begin_window once the harness's own untimed
  // work before the call (other than its prefixed kernels) has finished on the device, and end_window
  // after the synchronization that ends the call: work is put in the window it started in.
  void begin_window(cudaStream_t stream);
  void end_window();

  // Stops and starts recording the device's work (CUPTI's activity records), so that the main timing
  // loop runs without CUPTI's instrumentation and only a short verification loop with it. Contexts
  // created are noticed either way. A clock starts recording.
  void pause();
  void resume();

  // Flushes CUPTI's buffers and returns the windows since the last collect, with what fell between
  // them. Call it after a device synchronization (work still running has no record yet).
  KernelClockReport collect();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace d2k
#endif
