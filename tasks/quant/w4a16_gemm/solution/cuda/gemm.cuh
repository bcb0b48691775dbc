// The tensor-core kernel: y[m0:m0+TM, n0:n0+TN] over a range of K, for every M.
//
// A CTA has WM x WN x WK warps. Warp (wm, wn, wk) owns MB m16 row blocks (rows wm * MB * 16 ...) by one
// 64-wide column block (wn) and a WK-th of every stage's K. Per stage (TK K values, within one scale
// group) the CTA copies, with cp.async into a STAGES-deep ring: the weight's 16 x 64 blocks (prepared
// layout, layout.cuh), the group's scales, and x's TM x TK tile (rows past M zero-filled, 16-byte chunks
// XOR-swizzled by row so that ldmatrix is conflict-free). Each warp, per k16 step: one 16-byte shared
// load gives its 32 codes, 16 lop3 + 32 bf16x2 FMAs make them the B registers of 8 MMAs, and for each of
// its MB row blocks one ldmatrix.x4 gives the A registers: 8 x MB mma.sync m16n8k16, fp32 accumulators.
//
// The WK warps of a column block add their accumulators through shared memory in warp order. With one
// K split (gridDim.z == 1) the CTA rounds to bf16 and writes y; otherwise it writes fp32 partials to the
// workspace, and the last CTA of the tile to arrive (a counter per tile) adds the partials in split
// order (deterministic whatever the arrival order), rounds once, writes y and re-arms the counter.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "layout.cuh"
#include "ptx.cuh"

namespace w4a16 {

struct GemmParams {
  const __nv_bfloat16* x;  // [M, K]
  const uint4* weight;     // prepared (layout.cuh)
  const uint4* scales;     // prepared
  __nv_bfloat16* y;        // [M, N]
  float* partial;          // [splits, M, N] fp32, when gridDim.z > 1
  int* counters;           // one per tile, zero between calls
  int M, N, K, NB;
  int iters_per_split;     // stages of K per split
};

template <int WM_, int WN_, int WK_, int MB_, int TK_, int STAGES_, int MIN_CTAS_>
struct Config {
  static constexpr int WM = WM_, WN = WN_, WK = WK_, MB = MB_, TK = TK_, STAGES = STAGES_, MIN_CTAS = MIN_CTAS_;
  static constexpr int kWarps = WM * WN * WK;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int TM = WM * MB * 16;
  static constexpr int TN = WN * 64;
  static constexpr int kSteps = TK / 16 / WK;  // k16 steps per warp per stage
  static constexpr int kWeightBytes = TK * TN / 2;
  static constexpr int kScaleBytes = WN * 128;
  static constexpr int kXChunks = TK / 8;  // 16-byte chunks per row of the x tile
  static constexpr int kXBytes = TM * TK * 2;
  static constexpr int kStageBytes = kWeightBytes + kScaleBytes + kXBytes;
  static constexpr int kReduceBytes = (WK - 1) * WM * WN * 32 * MB * 8 * 4 * 4;
  static constexpr int kSmemBytes = STAGES * kStageBytes > kReduceBytes ? STAGES * kStageBytes : kReduceBytes;
  static_assert(kGroup % TK == 0, "a stage lies within one scale group");
  static_assert(TK % (16 * WK) == 0, "the stage's k16 steps divide among the WK warps");
  static_assert(kXChunks >= 8, "the x swizzle needs 8 chunks per row");
  static_assert(kPadN % TN == 0, "tiles lie inside the padded weight");
  static_assert((kWeightBytes / 16) % kThreads == 0, "weight chunks divide among the threads");
  static_assert(kScaleBytes / 16 <= kThreads, "one scale chunk per thread at most");
};

// What one thread copies per stage: kWeightPer 16-byte chunks of the weight, at most one of the scales
// and kXPer of x. The addresses are computed once; a stage adds its K offset.
template <class C>
struct Loader {
  static constexpr int kWeightPer = C::kWeightBytes / 16 / C::kThreads;
  static constexpr int kXPer = (C::TM * C::kXChunks + C::kThreads - 1) / C::kThreads;
  const uint4* weight;           // chunk 0 of stage 0; chunk i is i * weight_step further
  const uint4* scales;           // group 0's chunk; null for the threads that copy none
  const __nv_bfloat16* x[kXPer];
  size_t weight_step, weight_stage, scale_group;
  uint32_t x_dst[kXPer];
  uint32_t x_valid;              // bit i: chunk i is a row of x (else zero-filled)
  uint64_t policy;

  __device__ __forceinline__ Loader(const GemmParams& p, int m0, int nb0, int it_begin) {
    const int tid = threadIdx.x, k0 = it_begin * C::TK;
    const int lane = tid % 32, nb = tid / 32 % C::WN, kb = tid / 32 / C::WN;
    weight = p.weight + ((size_t)(k0 / 16 + kb) * p.NB + nb0 + nb) * 32 + lane;
    static_assert(C::kThreads % (32 * C::WN) == 0, "a thread's chunks differ by whole k16 rows of blocks");
    weight_step = (size_t)(C::kThreads / 32 / C::WN) * p.NB * 32;
    weight_stage = (size_t)(C::TK / 16) * p.NB * 32;
    scales = tid < C::kScaleBytes / 16 ? p.scales + (size_t)(nb0 + tid / 8) * 8 + tid % 8 : nullptr;
    scale_group = (size_t)p.NB * 8;
    x_valid = 0;
#pragma unroll
    for (int i = 0; i < kXPer; ++i) {
      const int c = tid + i * C::kThreads;
      const int r = c / C::kXChunks, ch = c % C::kXChunks, row = m0 + r;
      const bool valid = c < C::TM * C::kXChunks && row < p.M;
      x_valid |= (valid ? 1u : 0u) << i;
      x[i] = p.x + (size_t)(valid ? row : 0) * p.K + k0 + (valid ? ch * 8 : 0);
      x_dst[i] = (r * C::kXChunks + (ch ^ (r % 8))) * 16;
    }
    policy = evict_first_policy();
  }

  // Copies iteration `it` (it_begin + rel) into the stage at shared address `base`.
  __device__ __forceinline__ void issue(uint32_t base, int rel, int it) const {
    const int tid = threadIdx.x;
    const uint4* w = weight + (size_t)rel * weight_stage;
#pragma unroll
    for (int i = 0; i < kWeightPer; ++i) cp_async_16(base + (tid + i * C::kThreads) * 16, w + i * weight_step, policy);
    if (scales) cp_async_16(base + C::kWeightBytes + tid * 16, scales + (size_t)(it * C::TK / kGroup) * scale_group, policy);
    const uint32_t xs = base + C::kWeightBytes + C::kScaleBytes;
#pragma unroll
    for (int i = 0; i < kXPer; ++i) {
      if ((C::TM * C::kXChunks) % C::kThreads == 0 || tid + i * C::kThreads < C::TM * C::kXChunks)
        cp_async_16_or_zero(xs + x_dst[i], x[i] + (size_t)rel * C::TK, (x_valid >> i) & 1);
    }
  }
};

template <class C>
__device__ __forceinline__ void compute_stage(const unsigned char* stage, int wm, int wn, int wk, int lane,
                                              float (&acc)[C::MB][8][4]) {
  const uint32_t base = smem_address(stage);
  const uint32_t xs = base + C::kWeightBytes + C::kScaleBytes;
  // The 8 scales of this lane's columns (8j + g), each doubled into a bf16 pair.
  const uint4 sv = lds_128(base + C::kWeightBytes + wn * 128 + (lane / 4) * 16);
  const uint32_t s_words[4] = {sv.x, sv.y, sv.z, sv.w};
  uint32_t scale2[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    scale2[2 * i] = broadcast_low(s_words[i]);
    scale2[2 * i + 1] = broadcast_high(s_words[i]);
  }
#pragma unroll
  for (int s = 0; s < C::kSteps; ++s) {
    const int kb = wk * C::kSteps + s;
    const uint4 q = lds_128(base + (kb * C::WN + wn) * 512 + lane * 16);
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
    uint32_t b[8][2];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      b[2 * i][0] = dequant_pair(words[i], scale2[2 * i]);
      b[2 * i][1] = dequant_pair(words[i] >> 4, scale2[2 * i]);
      b[2 * i + 1][0] = dequant_pair(words[i] >> 8, scale2[2 * i + 1]);
      b[2 * i + 1][1] = dequant_pair(words[i] >> 12, scale2[2 * i + 1]);
    }
#pragma unroll
    for (int mb = 0; mb < C::MB; ++mb) {
      const int r = (wm * C::MB + mb) * 16 + (lane % 16);
      const int ch = kb * 2 + lane / 16;
      uint32_t a[4];
      ldmatrix_x4(a, xs + (r * C::kXChunks + (ch ^ (r % 8))) * 16);
#pragma unroll
      for (int j = 0; j < 8; ++j) mma_bf16_16816(acc[mb][j], a, b[j][0], b[j][1]);
    }
  }
}

template <class C>
__global__ void __launch_bounds__(C::kThreads, C::MIN_CTAS) w4a16_mma(GemmParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int last_arrival;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp % C::WM, wn = warp / C::WM % C::WN, wk = warp / (C::WM * C::WN);
  const int m0 = blockIdx.y * C::TM, nb0 = blockIdx.x * C::WN, n0 = nb0 * 64;
  const int iters = p.K / C::TK;
  const int it_begin = blockIdx.z * p.iters_per_split;
  const int it_end = min(iters, it_begin + p.iters_per_split);
  const Loader<C> loader(p, m0, nb0, it_begin);
  const uint32_t ring = smem_address(smem);

  float acc[C::MB][8][4];
#pragma unroll
  for (int mb = 0; mb < C::MB; ++mb)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mb][j][e] = 0.0f;

  // The ring: stage `it % STAGES` holds iteration it. A group is committed for every slot, empty or not,
  // so that wait_group counts stay uniform.
#pragma unroll
  for (int s = 0; s < C::STAGES - 1; ++s) {
    if (it_begin + s < it_end) loader.issue(ring + s * C::kStageBytes, s, it_begin + s);
    cp_async_commit();
  }
  for (int it = it_begin; it < it_end; ++it) {
    cp_async_wait<C::STAGES - 2>();
    __syncthreads();  // stage `it` is visible to all; the slot refilled below was consumed by everyone
    const int next = it + C::STAGES - 1;
    if (next < it_end) loader.issue(ring + ((next - it_begin) % C::STAGES) * C::kStageBytes, next - it_begin, next);
    cp_async_commit();
    compute_stage<C>(smem + ((it - it_begin) % C::STAGES) * C::kStageBytes, wm, wn, wk, lane, acc);
  }
  cp_async_wait<0>();
  __syncthreads();

  // Warps wk > 0 hand their sums to warp wk = 0 of the same (wm, wn), which adds them in wk order.
  if constexpr (C::WK > 1) {
    float* red = reinterpret_cast<float*>(smem);
    const int slot = wn * C::WM + wm;
    constexpr int kValues = C::MB * 8 * 4;
    if (wk > 0) {
      float* mine = red + ((size_t)((wk - 1) * C::WM * C::WN + slot) * kValues) * 32;
#pragma unroll
      for (int mb = 0; mb < C::MB; ++mb)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) mine[((mb * 8 + j) * 4 + e) * 32 + lane] = acc[mb][j][e];
    }
    __syncthreads();
    if (wk == 0) {
      for (int other = 1; other < C::WK; ++other) {
        const float* theirs = red + ((size_t)((other - 1) * C::WM * C::WN + slot) * kValues) * 32;
#pragma unroll
        for (int mb = 0; mb < C::MB; ++mb)
#pragma unroll
          for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mb][j][e] += theirs[((mb * 8 + j) * 4 + e) * 32 + lane];
      }
    }
  }

  // Lane (g, t) holds, per row block mb and subtile j: rows g and g + 8, columns 2t and 2t + 1.
  const int g = lane / 4, t = lane % 4;
  const bool direct = gridDim.z == 1;
  if (wk == 0) {
#pragma unroll
    for (int mb = 0; mb < C::MB; ++mb) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int m = m0 + (wm * C::MB + mb) * 16 + g + 8 * half;
        if (m >= p.M) continue;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int n = n0 + wn * 64 + j * 8 + 2 * t;
          if (n >= p.N) continue;  // N is a multiple of 8: n and n + 1 are both in or both out
          const float v0 = acc[mb][j][2 * half], v1 = acc[mb][j][2 * half + 1];
          if (direct) {
            *reinterpret_cast<__nv_bfloat162*>(p.y + (size_t)m * p.N + n) = __floats2bfloat162_rn(v0, v1);
          } else {
            *reinterpret_cast<float2*>(p.partial + ((size_t)blockIdx.z * p.M + m) * p.N + n) = make_float2(v0, v1);
          }
        }
      }
    }
  }
  if (direct) return;

  // Split K: the last CTA of this tile to finish adds the partials in split order.
  __threadfence();
  __syncthreads();
  const int tile = blockIdx.y * gridDim.x + blockIdx.x;
  if (tid == 0) last_arrival = atomicAdd(p.counters + tile, 1) == (int)gridDim.z - 1;
  __syncthreads();
  if (!last_arrival) return;
  __threadfence();
  const int rows = min(C::TM, p.M - m0), cols4 = (min(C::TN, p.N - n0)) / 4;
  const size_t split_stride = (size_t)p.M * p.N;
  for (int e = tid; e < rows * cols4; e += C::kThreads) {
    const int r = e / cols4, c = (e % cols4) * 4;
    const float* src = p.partial + (size_t)(m0 + r) * p.N + n0 + c;
    float4 sum = __ldcg(reinterpret_cast<const float4*>(src));
    for (int z = 1; z < (int)gridDim.z; ++z) {
      const float4 v = __ldcg(reinterpret_cast<const float4*>(src + z * split_stride));
      sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
    }
    const __nv_bfloat162 lo = __floats2bfloat162_rn(sum.x, sum.y), hi = __floats2bfloat162_rn(sum.z, sum.w);
    uint2 out;
    out.x = *reinterpret_cast<const uint32_t*>(&lo);
    out.y = *reinterpret_cast<const uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(p.y + (size_t)(m0 + r) * p.N + n0 + c) = out;
  }
  if (tid == 0) p.counters[tile] = 0;  // re-armed for the next call (stream order follows)
}

}  // namespace w4a16
