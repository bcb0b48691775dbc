// The merge of a sequence's splits (split-KV): for each (sequence, query head) whose context spans two
// splits or more, the splits' normalized outputs weighted by 2^(lse_s - max) / sum, in fp32, rounded once;
// lse = max + log2(sum), converted to the natural log. Sequences with one split were written directly.
#pragma once

#include <cuda_bf16.h>

#include <cmath>

#include "plan.cuh"
#include "sm80_ops.cuh"

namespace decode {

// One CTA of 128 threads per (sequence, query head); thread d owns dim d.
__global__ void __launch_bounds__(kHeadDim) merge_splits(Params p) {
  const int b = static_cast<int>(blockIdx.x) / p.heads, h = static_cast<int>(blockIdx.x) % p.heads;
  const int used = splits_used(p.seq_lens[b * p.seq_lens_stride], p.split_pages);
  if (used <= 1) return;
  const int d = static_cast<int>(threadIdx.x);
  const int64_t first = partial_index(b, h, 0, p.heads, p.splits);
  float m = -INFINITY;
  for (int s = 0; s < used; ++s) m = fmaxf(m, p.partial_lse[first + s]);
  float sum = 0.0f, acc = 0.0f;
  for (int s = 0; s < used; ++s) {
    const float weight = exp2_approx(p.partial_lse[first + s] - m);
    sum += weight;
    acc += weight * p.partial_o[(first + s) * kHeadDim + d];
  }
  p.o[b * p.o_seq + h * p.o_head + d] = __float2bfloat16_rn(acc / sum);
  if (d == 0) p.lse[h * p.lse_head + b * p.lse_seq] = (m + __log2f(sum)) * 0.6931471805599453f;
}

}  // namespace decode
