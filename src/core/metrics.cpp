#include "core/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace d2k {
namespace {

// The memory rate a floor divides by: the measured one, or the device's bound (the measured one where
// the bound is not known).
double memory_rate(const Ceilings& ceiling, FloorRate which) {
  if (which == FloorRate::bound)
    if (auto bound = ceiling.memory_bound_gbps()) return *bound;
  return ceiling.memory_gbps();
}

double memory_floor_ms(double min_bytes, const Ceilings& ceiling, FloorRate which) {
  const double gbps = memory_rate(ceiling, which);
  return gbps > 0 ? min_bytes / (gbps * 1e9) * 1e3 : 0.0;
}

// The matrix rate a floor divides by: the measured one, or the device's bound (the measured one where
// the bound is not known).
std::optional<double> floor_rate(const Ceilings& ceiling, DType flops_dtype, FloorRate which) {
  if (which == FloorRate::bound)
    if (auto bound = ceiling.matrix_bound(flops_dtype)) return bound;
  return ceiling.matrix_rate(flops_dtype);
}

double compute_floor_ms(double flops, const Ceilings& ceiling, DType flops_dtype, FloorRate which) {
  const auto rate = floor_rate(ceiling, flops_dtype, which);
  return rate && *rate > 0 ? flops / (*rate * 1e12) * 1e3 : 0.0;
}

// Dense tensor-core operations per SM per clock, by compute capability (major * 10 + minor) and the
// dtype of the FLOPs: the instruction rates of the architecture. A100 (80): 1024 bf16 FMAs, twice that
// many int8 products, no fp8. Hopper (90): twice A100's bf16 rate, fp8 and int8 twice bf16's; with
// H100 SXM's 132 SMs at 1830 MHz these give its datasheet's 989 and 1979 dense TFLOP/s.
std::optional<double> ops_per_sm_clock(int compute_capability, DType flops_dtype) {
  const bool eight_bit = flops_dtype == DType::f8e4m3 || flops_dtype == DType::i8;
  switch (compute_capability) {
    case 80:
      if (flops_dtype == DType::f8e4m3) return std::nullopt;
      return eight_bit ? 4096.0 : 2048.0;
    case 90: return eight_bit ? 8192.0 : 4096.0;
    default: return std::nullopt;
  }
}

}  // namespace

double Ceilings::memory_gbps() const { return std::max(copy_gbps, read_gbps); }

std::optional<double> Ceilings::matrix_rate(DType flops_dtype) const {
  switch (flops_dtype) {
    case DType::f8e4m3: return fp8_tflops;
    case DType::i8: return int8_tops;
    default: return bf16_tflops;
  }
}

std::optional<double> Ceilings::matrix_bound(DType flops_dtype) const {
  if (sm_count <= 0 || sm_max_mhz <= 0) return std::nullopt;
  const auto per_clock = ops_per_sm_clock(compute_capability, flops_dtype);
  if (!per_clock) return std::nullopt;
  return *per_clock * sm_count * sm_max_mhz * 1e6 / 1e12;
}

std::optional<double> Ceilings::memory_bound_gbps() const {
  if (memory_max_mhz <= 0 || memory_bus_bits <= 0) return std::nullopt;
  return memory_max_mhz * 1e6 * 2.0 * (memory_bus_bits / 8.0) / 1e9;
}

double floor_ms(double flops, double min_bytes, const Ceilings& ceiling, DType flops_dtype) {
  return std::max(memory_floor_ms(min_bytes, ceiling, FloorRate::measured),
                  compute_floor_ms(flops, ceiling, flops_dtype, FloorRate::measured));
}

std::optional<std::string> below_floor(double median_ms, double fraction, double flops, double min_bytes,
                                       const Ceilings& ceiling, DType flops_dtype, FloorRate which) {
  const double memory_ms = memory_floor_ms(min_bytes, ceiling, which);
  const double compute_ms = compute_floor_ms(flops, ceiling, flops_dtype, which);
  const double floor = std::max(memory_ms, compute_ms);
  if (floor <= 0 || median_ms >= fraction * floor) return std::nullopt;
  const std::string why =
      memory_ms >= compute_ms && which == FloorRate::bound && ceiling.memory_bound_gbps()
          ? fmt::format("{:.4g} MB at the device's memory bound of {:.4g} GB/s: a {}-bit bus at {} MHz, two "
                        "transfers per clock",
                        min_bytes / 1e6, *ceiling.memory_bound_gbps(), ceiling.memory_bus_bits, ceiling.memory_max_mhz)
      : memory_ms >= compute_ms
          ? fmt::format("{:.4g} MB at the measured memory bandwidth of {:.4g} GB/s ({})", min_bytes / 1e6,
                        ceiling.memory_gbps(), ceiling.read_gbps > ceiling.copy_gbps ? "reading" : "copying")
      : which == FloorRate::bound && ceiling.matrix_bound(flops_dtype)
          ? fmt::format("{:.4g} GFLOP at the device's {} bound of {:.4g} TFLOP/s: {} SMs at {} MHz", flops / 1e9,
                        name_of(flops_dtype), *ceiling.matrix_bound(flops_dtype), ceiling.sm_count, ceiling.sm_max_mhz)
          : fmt::format("{:.4g} GFLOP at the measured {} rate of {:.4g} TFLOP/s", flops / 1e9, name_of(flops_dtype),
                        *ceiling.matrix_rate(flops_dtype));
  return fmt::format("median time {:.4g} ms is {:.0f}% of the speed-of-light floor of {:.4g} ms ({})", median_ms,
                     100.0 * median_ms / floor, floor, why);
}

Performance performance_of(const TimingSummary& solution, const std::optional<TimingSummary>& baseline,
                           double flops, double min_bytes, const Ceilings& ceiling, DType flops_dtype) {
  Performance p;
  p.solution = solution;
  p.baseline = baseline;
  p.flops = flops;
  p.min_bytes = min_bytes;
  const double seconds = solution.median_ms * 1e-3;
  if (seconds > 0) {
    p.achieved_gbps = min_bytes / seconds / 1e9;
    p.achieved_tflops = flops / seconds / 1e12;
    const double floor = floor_ms(flops, min_bytes, ceiling, flops_dtype);
    if (floor > 0) p.sol_fraction = floor / solution.median_ms;
  }
  if (baseline && solution.median_ms > 0) p.speedup = baseline->median_ms / solution.median_ms;
  return p;
}

void add_library(Performance& performance, const std::optional<TimingSummary>& library) {
  if (!library) return;
  performance.library = library;
  if (performance.solution.median_ms > 0) performance.speedup_over_library = library->median_ms / performance.solution.median_ms;
}

std::optional<double> geomean(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  double log_sum = 0.0;
  for (double v : values) log_sum += std::log(v);
  return std::exp(log_sum / static_cast<double>(values.size()));
}

}  // namespace d2k
