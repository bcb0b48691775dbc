// A trace: the result of one solution on one workload. Plain data; JSON mapping in core/json.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/device.hpp"

namespace d2k {

// The closed set of outcomes. Anything but passed means the solution is not correct on the workload.
enum class Status {
  passed,
  incorrect_shape,     // wrote only part of an output, or outside its extent
  incorrect_dtype,     // wrote another element type than the output's
  incorrect_numerics,  // values outside the tolerance, NaN or Inf
  compile_error,
  runtime_error,       // failed to load, returned an error, crashed, or faulted on the device
  timeout,
  rejected,            // caught doing something it must not (e.g. writing outside its outputs)
};

std::string_view name_of(Status status);
std::optional<Status> parse_status(std::string_view name);

// How far one compared tensor is from the oracle.
struct Comparison {
  std::string name;
  std::string metric;       // numeric | exact | segments
  bool passed = false;
  double nmse = 0.0;
  double max_abs_error = 0.0;
  double max_rel_error = 0.0;    // max |got - want| / |want| over elements with want != 0
  double worst_excess = 0.0;     // max |got - want| / (atol * rms(want) + rtol * |want|), rms of the output or row; <= 1 passes
  int64_t mismatches = 0;        // elements outside the tolerance (or unequal, for exact)
  int64_t non_finite = 0;        // NaN or Inf in the solution's output
  int64_t worst_index = -1;      // flat index of the worst element
  double worst_got = 0.0;
  double worst_want = 0.0;
  int64_t elements = 0;
  std::optional<double> misrounded;  // the share of elements off the correctly rounded oracle, when the tolerance asks
  std::string detail;  // segments: the first problem found, in words (which value, where, what belongs there)
};

// Median and spread of one timed call, in milliseconds.
struct TimingSummary {
  double median_ms = 0.0;
  double p10_ms = 0.0;
  double p90_ms = 0.0;
  double min_ms = 0.0;
  double mean_ms = 0.0;
  double ci_low_ms = 0.0;   // 95% confidence interval of the median (order statistics)
  double ci_high_ms = 0.0;
  int samples = 0;
};

// One reading of the GPU's clocks and health (NVML), taken by the worker just before and just after the
// solution's timed calls. d2k only reads them: it never sets a clock.
struct ClockReading {
  unsigned sm_mhz = 0;
  unsigned sm_max_mhz = 0;          // the highest SM clock the GPU supports
  unsigned sm_application_mhz = 0;  // the SM clock the GPU targets under load (0: not reported)
  unsigned memory_mhz = 0;
  unsigned temperature_c = 0;
  double power_w = 0.0;
  uint64_t throttle_reasons = 0;    // NVML's clock event reason bits
};

struct GpuClocks {
  bool available = false;
  std::string unavailable;          // why not, when not available (no NVML, no GPU)
  ClockReading before, after;
  std::vector<std::string> reasons; // names of the throttle reasons seen in either reading
  bool throttled = false;           // thermal or power throttling, or a low SM clock, while timing
  std::string warning;              // for a person, when throttled
};

// The outside clock of the timed calls (docs/metrics.md): what a clock the solution cannot reach says
// each call took, against what the worker's own timer reported.
struct OutsideClock {
  std::string by;            // "wall" (the orchestrator's clock) or "cpu" (the kernel's count of the worker's time on or waiting for a CPU)
  double harness_ms = 0.0;   // the harness's own cost per call: the same loop with nothing called
  double implied_ms = 0.0;   // per timed call, beyond the harness's own cost, by the smaller of the two clocks
  double reported_ms = 0.0;  // the mean of the worker's samples
  std::optional<double> wall_implied_ms, cpu_implied_ms;  // each clock's own account
};

// The second clock of the timed calls (cuda): the device's own records (CUPTI) of the verification
// calls' work against the timer's account of them, medians.
struct SecondClock {
  double event_ms = 0.0;         // the verification calls' events
  double busy_ms = 0.0;          // the union of the solution's device work in each
  double timed_median_ms = 0.0;  // the timed loop's
};

// The wall time of one step of evaluating a workload (docs/metrics.md lists them).
struct Phase {
  std::string name;
  double seconds = 0.0;
};

struct Performance {
  TimingSummary solution;
  std::optional<TimingSummary> baseline;  // the eager reference
  std::optional<double> speedup;          // baseline median / solution median
  std::optional<TimingSummary> library;   // the fused library path, where the task has one
  std::optional<double> speedup_over_library;  // library median / solution median
  double flops = 0.0;                     // of the workload, from the task's formula
  double min_bytes = 0.0;
  double achieved_gbps = 0.0;             // min_bytes / solution median
  double achieved_tflops = 0.0;           // flops / solution median
  std::optional<double> sol_fraction;     // speed-of-light time / solution median (1 = at the floor)
  int rotation_sets = 1;                  // copies of the inputs and outputs the timed calls cycled through
  int64_t rotation_bytes = 0;             // their tensor bytes together
};

struct Trace {
  std::string task;
  std::string workload;
  std::string solution;
  Device device = Device::cpu;
  Status status = Status::runtime_error;
  std::string message;  // why, for a person; empty when passed
  std::string log;      // compiler or worker output, capped
  uint64_t seed = 0;
  std::vector<Comparison> comparisons;
  std::optional<Performance> performance;
  std::string device_name;
  std::string timestamp;  // ISO 8601, UTC
  std::optional<GpuClocks> clocks;  // cuda: around the solution's timed calls
  std::optional<OutsideClock> outside_clock;  // when the solution was timed and its clock marks came back
  std::optional<SecondClock> second_clock;    // cuda, when CUPTI ran
  std::vector<Phase> phases;        // where the wall time of evaluating the workload went
  double wall_seconds = 0.0;        // the whole evaluation of the workload
  // What a person should know about a passed trace: throttled clocks, a time faster than the speed of
  // light that the warm L2 explains, a check that could not run.
  std::vector<std::string> warnings;
};

}  // namespace d2k
