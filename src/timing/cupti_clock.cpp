#include "timing/cupti_clock.hpp"

#ifdef D2K_WITH_CUDA
#include <cuda.h>
#include <cupti.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "core/error.hpp"
#include "timing/cuda_util.hpp"

namespace d2k {
namespace {

// CUPTI's own buffers: a few MiB each, as its samples use; it asks for more when one fills.
constexpr std::size_t kBufferBytes = std::size_t{4} << 20;
constexpr std::size_t kBufferAlignment = 8;
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};

void check_cupti(CUptiResult result, const char* what) {
  if (result == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  fail("{} failed: {}", what, text != nullptr ? text : "unknown CUPTI error");
}

// One kernel, copy or memset, as its record said.
struct Work {
  uint64_t start = 0;
  uint64_t end = 0;
  uint32_t context = 0;
  uint32_t stream = 0;
  bool kernel = false;
  bool harness = false;
  std::string name;  // kernels only
};

// What CUPTI's callbacks fill. They are plain C functions, called on CUPTI's worker thread or in
// cuptiActivityFlushAll; the object lives as long as the process, so a late callback never meets a
// destroyed one.
struct Shared {
  std::mutex mutex;
  bool active = false;
  std::string prefix;
  std::vector<Work> work;
  std::vector<std::string> contexts_created;
};

Shared& shared() {
  static Shared* state = new Shared;
  return *state;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
  Shared& state = shared();
  std::string prefix;
  {
    std::lock_guard lock(state.mutex);
    prefix = state.prefix;
  }
  std::vector<Work> parsed;
  CUpti_Activity* record = nullptr;
  while (buffer != nullptr && cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    Work work;
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      work = {kernel->start, kernel->end, kernel->contextId, kernel->streamId, true, false,
              kernel->name != nullptr ? kernel->name : ""};
      work.harness = !prefix.empty() && work.name.rfind(prefix, 0) == 0;
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* copy = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      work = {copy->start, copy->end, copy->contextId, copy->streamId, false, false, {}};
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* set = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      work = {set->start, set->end, set->contextId, set->streamId, false, false, {}};
    } else {
      continue;
    }
    parsed.push_back(std::move(work));
  }
  std::free(buffer);
  std::lock_guard lock(state.mutex);
  if (state.active) state.work.insert(state.work.end(), parsed.begin(), parsed.end());
}

void CUPTIAPI on_resource(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || id != CUPTI_CBID_RESOURCE_CONTEXT_CREATED) return;
  const auto* resource = static_cast<const CUpti_ResourceData*>(data);
  uint32_t context = 0, device = 0;
  cuptiGetContextId(resource->context, &context);
  cuptiGetDeviceId(resource->context, &device);
  Shared& state = shared();
  std::lock_guard lock(state.mutex);
  if (state.active) state.contexts_created.push_back(fmt::format("context {} on device {}", context, device));
}

// The context current on this thread. Through the runtime's entry point rather than libcuda's symbol:
// the worker must start (for the cpu device) on machines where libcuda.so.1 is absent.
CUcontext current_context() {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found{};
  check_cuda(cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &function, CUDART_VERSION, cudaEnableDefault, &found),
             "cudaGetDriverEntryPointByVersion(cuCtxGetCurrent)");
  if (found != cudaDriverEntryPointSuccess || function == nullptr) fail("the CUDA driver has no cuCtxGetCurrent");
  CUcontext context = nullptr;
  if (reinterpret_cast<CUresult (*)(CUcontext*)>(function)(&context) != CUDA_SUCCESS || context == nullptr)
    fail("no CUDA context is current: create it (cudaFree(nullptr)) before the KernelClock");
  return context;
}

uint64_t now_ns() {
  uint64_t timestamp = 0;
  check_cupti(cuptiGetTimestamp(&timestamp), "cuptiGetTimestamp");
  return timestamp;
}

// The union of [start, end) intervals, in ns.
uint64_t union_ns(std::vector<std::pair<uint64_t, uint64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  uint64_t total = 0, open = 0, close = 0;
  bool any = false;
  for (const auto& [start, end] : intervals) {
    if (any && start <= close) {
      close = std::max(close, end);
      continue;
    }
    if (any) total += close - open;
    open = start;
    close = std::max(start, end);
    any = true;
  }
  if (any) total += close - open;
  return total;
}

}  // namespace

struct KernelClock::State {
  CUpti_SubscriberHandle subscriber = nullptr;
  CUcontext context = nullptr;
  uint32_t context_id = 0;
  struct Open {
    KernelWindow window;
    uint32_t stream = 0;
  };
  std::vector<Open> windows;
  bool in_window = false;
};

KernelClock::KernelClock(std::string harness_prefix) : state_(std::make_unique<State>()) {
  Shared& state = shared();
  {
    std::lock_guard lock(state.mutex);
    if (state.active) fail("a KernelClock is already recording in this process (CUPTI allows one subscriber)");
  }
  state_->context = current_context();
  check_cupti(cuptiGetContextId(state_->context, &state_->context_id), "cuptiGetContextId");
  check_cupti(cuptiSubscribe(&state_->subscriber, on_resource, nullptr),
              "cuptiSubscribe (is another CUPTI client, a profiler, attached?)");
  try {
    check_cupti(cuptiEnableCallback(1, state_->subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED),
                "cuptiEnableCallback(CONTEXT_CREATED)");
    // Once per process: the same two functions serve every clock.
    static const CUptiResult registered = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    check_cupti(registered, "cuptiActivityRegisterCallbacks");
    {
      std::lock_guard lock(state.mutex);
      state.active = true;
      state.prefix = std::move(harness_prefix);
      state.work.clear();
      state.contexts_created.clear();
    }
    for (CUpti_ActivityKind kind : kKinds) check_cupti(cuptiActivityEnable(kind), "cuptiActivityEnable");
  } catch (...) {
    for (CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
    cuptiUnsubscribe(state_->subscriber);
    std::lock_guard lock(state.mutex);
    state.active = false;
    throw;
  }
}

KernelClock::~KernelClock() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
  cuptiUnsubscribe(state_->subscriber);
  Shared& state = shared();
  std::lock_guard lock(state.mutex);
  state.active = false;
  state.work.clear();
  state.contexts_created.clear();
}

void KernelClock::pause() {
  check_cupti(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  for (CUpti_ActivityKind kind : kKinds) check_cupti(cuptiActivityDisable(kind), "cuptiActivityDisable");
}

void KernelClock::resume() {
  for (CUpti_ActivityKind kind : kKinds) check_cupti(cuptiActivityEnable(kind), "cuptiActivityEnable");
}

void KernelClock::begin_window(cudaStream_t stream) {
  if (state_->in_window) fail("KernelClock::begin_window: the previous window was not ended");
  State::Open open;
  check_cupti(cuptiGetStreamIdEx(state_->context, stream, 0, &open.stream), "cuptiGetStreamIdEx");
  open.window.begin_ns = now_ns();
  state_->windows.push_back(std::move(open));
  state_->in_window = true;
}

void KernelClock::end_window() {
  if (!state_->in_window) fail("KernelClock::end_window: no window is open");
  state_->windows.back().window.end_ns = now_ns();
  state_->in_window = false;
}

KernelClockReport KernelClock::collect() {
  if (state_->in_window) fail("KernelClock::collect: a window is still open");
  check_cupti(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  std::vector<Work> work;
  KernelClockReport report;
  {
    Shared& state = shared();
    std::lock_guard lock(state.mutex);
    work.swap(state.work);
    report.contexts_created.swap(state.contexts_created);
  }
  std::vector<State::Open> windows;
  windows.swap(state_->windows);
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> intervals(windows.size());
  for (const Work& item : work) {
    // The window this work started in: the last one opened at or before its start, if still open then.
    auto after = std::upper_bound(windows.begin(), windows.end(), item.start,
                                  [](uint64_t start, const State::Open& open) { return start < open.window.begin_ns; });
    State::Open* open = after == windows.begin() ? nullptr : &*std::prev(after);
    if (open != nullptr && item.start > open->window.end_ns) {
      if (item.kernel && !item.harness) ++report.kernels_between_windows;
      continue;
    }
    if (open == nullptr) continue;  // before the first window: the set-up's
    KernelWindow& window = open->window;
    if (item.harness) {
      ++window.harness_kernels;
      continue;
    }
    (item.kernel ? window.kernels : window.copies) += 1;
    const bool other_context = item.context != state_->context_id;
    const bool other_stream = other_context || item.stream != open->stream;
    window.other_context += other_context ? 1 : 0;
    window.other_stream += other_stream ? 1 : 0;
    if (other_stream && item.kernel) window.other_stream_names.push_back(item.name);
    window.first_start_ns = window.first_start_ns == 0 ? item.start : std::min(window.first_start_ns, item.start);
    window.last_end_ns = std::max(window.last_end_ns, item.end);
    intervals[static_cast<std::size_t>(open - windows.data())].emplace_back(item.start, item.end);
  }
  for (std::size_t i = 0; i < windows.size(); ++i) {
    windows[i].window.busy_ns = union_ns(std::move(intervals[i]));
    report.windows.push_back(std::move(windows[i].window));
  }
  return report;
}

}  // namespace d2k
#endif
