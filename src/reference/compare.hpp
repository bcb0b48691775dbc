// The error metrics: how far one tensor is from the oracle, against a tolerance (docs/metrics.md).
#pragma once

#include <ATen/ATen.h>

#include "core/task.hpp"
#include "core/trace.hpp"

namespace d2k {

// `got` and `want` have the same shape; any dtype and device. Compared in float64 where `want` lives:
// on a GPU as whole-tensor expressions (compare_whole), on the CPU in parallel chunks.
Comparison compare(const std::string& name, const at::Tensor& got, const at::Tensor& want,
                   const Tolerance& tolerance);

// The numeric metric as whole-tensor expressions on `want`'s device, whatever the tolerance's metric.
Comparison compare_whole(const std::string& name, const at::Tensor& got, const at::Tensor& want,
                         const Tolerance& tolerance);

}  // namespace d2k
