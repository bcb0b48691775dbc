// The merge of a sequence's splits (split-KV): for each (sequence, head) whose context spans two splits or
// more, the splits' normalized fp32 outputs weighted by 2^(lse_s - max) / sum, rounded once; lse = max +
// log2(sum), converted to the natural log. Sequences with one split were written by the attention kernel.
#pragma once

#include <cuda_bf16.h>

#include <cmath>

#include "plan.cuh"
#include "sm80_ops.cuh"

namespace mla {

constexpr int kMergeThreads = kValues / 4;  // four columns a thread

// One CTA per (sequence, head).
__global__ void __launch_bounds__(kMergeThreads) merge_splits(Params p) {
  const int b = static_cast<int>(blockIdx.x) / p.heads, h = static_cast<int>(blockIdx.x) % p.heads;
  const int used = splits_used(p.seq_lens[b * p.seq_lens_stride], p.split_pages);
  if (used <= 1) return;
  const int d = static_cast<int>(threadIdx.x) * 4;
  const int64_t first = partial_index(b, h, 0, p.heads, p.splits);
  float m = -INFINITY;
  for (int s = 0; s < used; ++s) m = fmaxf(m, p.partial_lse[first + s]);
  float sum = 0.0f;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int s = 0; s < used; ++s) {
    const float weight = exp2_approx(p.partial_lse[first + s] - m);
    const float4 part = *reinterpret_cast<const float4*>(p.partial_o + (first + s) * kValues + d);
    sum += weight;
    acc.x += weight * part.x, acc.y += weight * part.y, acc.z += weight * part.z, acc.w += weight * part.w;
  }
  const float inverse = 1.0f / sum;
  const uint2 packed = make_uint2(pack_bf16(acc.x * inverse, acc.y * inverse), pack_bf16(acc.z * inverse, acc.w * inverse));
  *reinterpret_cast<uint2*>(p.o + b * p.o_seq + h * p.o_head + d) = packed;
  if (d == 0) p.lse[b * p.lse_seq + h * p.lse_head] = (m + log2f(sum)) * 0.6931471805599453f;
}

}  // namespace mla
