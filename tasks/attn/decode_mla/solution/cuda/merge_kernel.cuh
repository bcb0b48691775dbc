// The merge of a sequence's splits (split-KV): for each (sequence, head) whose context spans two splits or
// more, the splits' normalized fp32 outputs weighted by 2^(lse_s - max) / sum, rounded once; lse = max +
// log2(sum), converted to the natural log. Sequences with one split were written by the attention kernel.
//
// One CTA per (sequence, head): kMergeGroups groups of 128 threads, four columns a thread; group g adds the
// splits g, g + kMergeGroups, ... (several 16-byte loads in flight per thread: with 65 splits of one long
// context, the partial rows are most of the bytes), and group 0 adds the groups' sums in a fixed order.
#pragma once

#include <cuda_bf16.h>

#include <cmath>

#include "plan.cuh"

namespace mla {

constexpr int kMergeLanes = kValues / 4;  // threads that cover one row, four columns each
constexpr int kMergeGroups = 4;
constexpr int kMergeThreads = kMergeLanes * kMergeGroups;

__global__ void __launch_bounds__(kMergeThreads) merge_splits(Params p) {
  __shared__ float4 group_sums[kMergeGroups - 1][kMergeLanes];
  const int b = static_cast<int>(blockIdx.x) / p.heads, h = static_cast<int>(blockIdx.x) % p.heads;
  const int used = splits_used(p.seq_lens[b * p.seq_lens_stride], p.split_pages);
  if (used <= 1) return;
  const int lane = static_cast<int>(threadIdx.x) % kMergeLanes, group = static_cast<int>(threadIdx.x) / kMergeLanes;
  const int64_t first = partial_index(b, h, 0, p.heads, p.splits);
  const float* __restrict__ lse = p.partial_lse + first;
  const float* __restrict__ parts = p.partial_o + first * kValues + lane * 4;
  float m = -INFINITY;
  for (int s = 0; s < used; ++s) m = fmaxf(m, lse[s]);
  float sum = 0.0f;
  for (int s = 0; s < used; ++s) sum += exp2_approx(lse[s] - m);
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4
  for (int s = group; s < used; s += kMergeGroups) {
    const float weight = exp2_approx(lse[s] - m);
    const float4 part = __ldg(reinterpret_cast<const float4*>(parts + static_cast<int64_t>(s) * kValues));
    acc.x += weight * part.x, acc.y += weight * part.y, acc.z += weight * part.z, acc.w += weight * part.w;
  }
  if (group > 0) group_sums[group - 1][lane] = acc;
  __syncthreads();
  if (group > 0) return;
#pragma unroll
  for (int g = 0; g < kMergeGroups - 1; ++g) {
    const float4 other = group_sums[g][lane];
    acc.x += other.x, acc.y += other.y, acc.z += other.z, acc.w += other.w;
  }
  const float inverse = 1.0f / sum;
  const uint2 packed = make_uint2(pack_bf16(acc.x * inverse, acc.y * inverse), pack_bf16(acc.z * inverse, acc.w * inverse));
  *reinterpret_cast<uint2*>(p.o + b * p.o_seq + h * p.o_head + lane * 4) = packed;
  if (lane == 0) p.lse[b * p.lse_seq + h * p.lse_head] = (m + log2f(sum)) * 0.6931471805599453f;
}

}  // namespace mla
