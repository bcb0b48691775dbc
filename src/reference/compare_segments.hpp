// The `segments` metric: a 1-D integer output whose order is free within segments, such as
// moe/align_block_size's sorted_token_ids, where each expert's tokens may come in any order
// (docs/metrics.md).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "core/trace.hpp"

namespace d2k {

// `got` and `want` are the solution's and the oracle's output (1-D, same length); `labels` is the
// oracle's label of each block of `block` consecutive elements (at least ceil(length / block) labels).
// A segment is a maximal run of blocks labelled alike. It passes when, in every segment, `got` holds
// `pad` exactly where `want` does and the other values are `want`'s other values in any order. Any device
// and integer dtype. `detail` names the first problem: a value that is no entry and not the pad, an entry
// twice, an entry missing, an entry in another segment, a pad out of place.
Comparison compare_segments(const std::string& name, const at::Tensor& got, const at::Tensor& want,
                            const at::Tensor& labels, int64_t block, int64_t pad);

}  // namespace d2k
