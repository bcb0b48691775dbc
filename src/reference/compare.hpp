// The error metrics: how far one tensor is from the oracle, against a tolerance (docs/metrics.md).
#pragma once

#include <ATen/ATen.h>

#include "core/task.hpp"
#include "core/trace.hpp"

namespace d2k {

// `got` and `want` have the same shape; any dtype and device (compared in float64 on the CPU).
Comparison compare(const std::string& name, const at::Tensor& got, const at::Tensor& want,
                   const Tolerance& tolerance);

}  // namespace d2k
