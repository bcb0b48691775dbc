// Every metric d2k reports, computed here and nowhere else. docs/metrics.md gives the formulas.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/ceilings.hpp"
#include "core/dtype.hpp"
#include "core/trace.hpp"

namespace d2k {

// Speedup over the baseline, achieved rates and the fraction of the speed of light of one workload.
Performance performance_of(const TimingSummary& solution, const std::optional<TimingSummary>& baseline,
                           double flops, double min_bytes, const Ceilings& ceiling,
                           DType flops_dtype = DType::bf16);

// Adds the library baseline's time and the speedup over it (library median / solution median); nothing
// changes when `library` is empty.
void add_library(Performance& performance, const std::optional<TimingSummary>& library);

// The speed-of-light time in milliseconds: the larger of the compute floor (FLOPs at the rate of
// `flops_dtype`) and the memory floor (min_bytes at the copy bandwidth). 0 when no ceiling applies.
double floor_ms(double flops, double min_bytes, const Ceilings& ceiling, DType flops_dtype = DType::bf16);

// Which rates a floor uses: the measured ones (the speed of light every % of SOL is of) or the device's
// bounds (Ceilings::matrix_bound and memory_bound_gbps, the measured rate where one is unknown), which no
// kernel beats.
enum class FloorRate { measured, bound };

// Why a median time is below `fraction` of the speed-of-light floor, with the numbers, or nullopt when it
// is not (or no ceiling applies). The evaluator's policy (eval/checks.hpp) rejects a median below the
// bounds' floor when the inputs were cold on a GPU: experts reach 100% of the measured read rate on the
// H200 (moe/sum_reduce) and over 100% of the measured matrix rate.
std::optional<std::string> below_floor(double median_ms, double fraction, double flops, double min_bytes,
                                       const Ceilings& ceilings, DType flops_dtype = DType::bf16,
                                       FloorRate which = FloorRate::measured);

// Geometric mean of positive values; nullopt when empty.
std::optional<double> geomean(const std::vector<double>& values);

}  // namespace d2k
