#include "timing/timer.hpp"

#ifdef D2K_WITH_CUDA
#include "timing/l2_flush.hpp"
#endif

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include "core/error.hpp"
#include "timing/cuda_util.hpp"
#include "timing/stats.hpp"

namespace d2k {
namespace {

using Clock = std::chrono::steady_clock;

bool precise_enough(const std::vector<double>& sorted, double target) {
  const double median = quantile(sorted, 0.5);
  const auto [low, high] = median_ci95(sorted);
  return median > 0 && (high - low) / 2.0 <= target * median;
}

// The shared sampling rule: stop at max_samples; or, once min_samples are in, when the time is up or
// the median is known well enough (its 95% interval within target_ci of it).
template <typename Sample>
std::vector<double> sample_until_done(const TimingConfig& config, Sample&& sample) {
  std::vector<double> samples, sorted;
  int max_samples = std::max(1, config.max_samples);
  int min_samples = std::clamp(config.min_samples, 1, max_samples);
  Clock::time_point start = Clock::now();
  while (static_cast<int>(samples.size()) < max_samples) {
    if (static_cast<int>(samples.size()) >= min_samples) {
      double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      if (elapsed >= config.max_seconds) break;
      if (config.target_ci > 0 && precise_enough(sorted, config.target_ci)) break;
    }
    samples.push_back(sample());
    sorted.insert(std::upper_bound(sorted.begin(), sorted.end(), samples.back()), samples.back());
  }
  return samples;
}

std::vector<double> measure_cpu(const std::function<void()>& call, const CallHooks& hooks,
                                const TimingConfig& config) {
  // No cache flush on the cpu device (config.flush_l2 is the GPU's L2): it is a test seam, and a 64 MiB
  // memset per call was most of its cost per call and of the noise of its outside clock.
  for (int i = 0; i < config.warmup; ++i) {
    if (hooks.before) hooks.before();
    call();
    if (hooks.right_after) hooks.right_after();
    if (hooks.after) hooks.after();
  }
  if (hooks.sampling_begins) hooks.sampling_begins();
  auto samples = sample_until_done(config, [&] {
    if (hooks.before) hooks.before();
    Clock::time_point begin = Clock::now();
    call();
    // Inside the sample: a thread the call left is counted before the clock stops, so that one which
    // ends while this thread waits for a core (a loaded machine) ended inside the timed interval, its
    // work timed. Counted after the clock, such a thread could finish the call's work untimed and
    // unseen (tests/corpus/outside_libc_pthread.cpp passed so in CI on two loaded cores).
    if (hooks.right_after) hooks.right_after();
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
    if (hooks.after) hooks.after();
    return ms;
  });
  if (hooks.sampling_ends) hooks.sampling_ends();
  return samples;
}

#ifdef D2K_WITH_CUDA
// Events see only the call's stream. Work the call hides on another stream, which the device-wide
// synchronization waits for, shows as host time beyond the event time. A sample whose host time,
// less the fixed cost of an empty sample, exceeds its event time by more than this slack is charged
// the host time instead: honest calls stay at their event time, hidden work is paid for.
constexpr double kHiddenWorkSlackMs = 0.02;
constexpr double kHiddenWorkSlackFraction = 0.1;
constexpr int kCalibrationSamples = 10;

struct CudaSample {
  double event_ms = 0;
  double host_ms = 0;
};

std::vector<double> measure_cuda(const std::function<void()>& call, const CallHooks& hooks,
                                 void* stream_handle, const TimingConfig& config) {
  auto stream = static_cast<cudaStream_t>(stream_handle);
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  int l2_bytes = 0;
  check_cuda(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device), "cudaDeviceGetAttribute");
  DeviceBuffer flush(config.flush_l2 ? 2 * static_cast<std::size_t>(l2_bytes) : 0);
  DeviceBuffer sink(flush.get() ? sizeof(unsigned) : 0);
  if (flush.get()) check_cuda(cudaMemsetAsync(flush.get(), 0x5A, flush.bytes(), stream), "cudaMemsetAsync");
  CudaEvent start, end;

  auto one_sample = [&](bool with_call) {
    if (with_call && hooks.before) {
      hooks.before();
      check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize before a timed call");
    }
    if (flush.get()) {
      check_cuda(flush_l2_by_reading(flush.get(), flush.bytes(), static_cast<unsigned*>(sink.get()), stream),
                 "the L2 flush");
    }
    Clock::time_point host_start = Clock::now();
    check_cuda(cudaEventRecord(start.get(), stream), "cudaEventRecord");
    if (with_call) call();
    check_cuda(cudaEventRecord(end.get(), stream), "cudaEventRecord");
    if (hooks.right_after) hooks.right_after();
    // Device-wide: work the call started elsewhere must end before the next sample's flush.
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after a timed call");
    check_cuda(cudaGetLastError(), "a timed call");
    CudaSample sample;
    sample.host_ms = std::chrono::duration<double, std::milli>(Clock::now() - host_start).count();
    sample.event_ms = elapsed_ms(start, end);
    if (with_call && hooks.after) hooks.after();
    return sample;
  };

  std::vector<double> fixed_costs;
  for (int i = 0; i < kCalibrationSamples; ++i) {
    CudaSample empty = one_sample(false);
    fixed_costs.push_back(empty.host_ms - empty.event_ms);
  }
  std::sort(fixed_costs.begin(), fixed_costs.end());
  double fixed_cost_ms = quantile(fixed_costs, 0.5);

  for (int i = 0; i < config.warmup; ++i) {
    if (hooks.before) hooks.before();
    call();
    if (hooks.right_after) hooks.right_after();
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after a warm-up call");
    check_cuda(cudaGetLastError(), "a warm-up call");
    if (hooks.after) hooks.after();
  }
  if (hooks.sampling_begins) hooks.sampling_begins();
  auto samples = sample_until_done(config, [&] {
    CudaSample sample = one_sample(true);
    double host_work_ms = sample.host_ms - fixed_cost_ms;
    bool hidden = host_work_ms > sample.event_ms * (1 + kHiddenWorkSlackFraction) + kHiddenWorkSlackMs;
    return hidden ? host_work_ms : sample.event_ms;
  });
  if (hooks.sampling_ends) hooks.sampling_ends();
  return samples;
}
#endif

}  // namespace

std::vector<double> measure(Device device, const std::function<void()>& call, void* stream,
                            const TimingConfig& config) {
  return measure(device, call, CallHooks{}, stream, config);
}

std::vector<double> measure(Device device, const std::function<void()>& call, const CallHooks& hooks,
                            void* stream, const TimingConfig& config) {
  if (device == Device::cpu) return measure_cpu(call, hooks, config);
#ifdef D2K_WITH_CUDA
  return measure_cuda(call, hooks, stream, config);
#else
  fail("cannot time on the cuda device: d2k was built without CUDA");
#endif
}

}  // namespace d2k
