// Every metric d2k reports, computed here and nowhere else. docs/metrics.md gives the formulas.
#pragma once

#include <optional>
#include <vector>

#include "core/trace.hpp"

namespace d2k {

// The measured ceilings of the device a time was taken on.
struct Ceiling {
  double copy_gbps = 0.0;               // bytes read + written per second / 1e9, device-to-device copy
  std::optional<double> peak_tflops;    // dense bf16 matrix rate
};

// Speedup over the baseline, achieved rates and the fraction of the speed of light of one workload.
Performance performance_of(const TimingSummary& solution, const std::optional<TimingSummary>& baseline,
                           double flops, double min_bytes, const Ceiling& ceiling);

// The speed-of-light time in milliseconds: the larger of the compute floor and the memory floor.
double floor_ms(double flops, double min_bytes, const Ceiling& ceiling);

// Geometric mean of positive values; nullopt when empty.
std::optional<double> geomean(const std::vector<double>& values);

}  // namespace d2k
