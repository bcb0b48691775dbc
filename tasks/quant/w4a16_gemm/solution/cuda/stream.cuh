// Version 4: the weight stream for M <= 16 (decode). Reading the int4 weight once is the whole cost, so
// the kernel is built around keeping HBM busy: per-warp rings of TMA bulk copies, no block-wide barrier
// after the prologue, few instructions per byte.
//
// The prepared weight (d2k_prepare, `prepare_stream`): chunks of 64 channels x one 128-wide K group, 4096
// bytes of codes followed by the 64 bf16 scales of that group (128 bytes): 4224 bytes, one TMA copy. The
// chunks of one 64-channel block ("cg") are consecutive along K. Inside a chunk, k16 step s (0..7) is 512
// bytes, lane l's 16 of them at s * 512 + 16 l: four 32-bit words, word cb holding the lane's 8 codes of
// the A operand of mma.sync m16n8k16 for channels 16 cb .. 16 cb + 15 (the swapped problem y^T = W^T x^T:
// channels are the MMA's rows, tokens its columns). `code_place` says which (K, channel) each nibble is.
// K is permuted inside each 32-wide block (the same permutation on both operands leaves the dot product
// unchanged) so that a lane's B registers for two k16 steps are 8 consecutive values of x: lane (g, t)
// holds x[g][32 b + 8 t .. 8 t + 7], and the A fragment's columns 2t, 2t+1 / 2t+8, 2t+9 of step 2b + h are
// K 32 b + 8 t + 4 h + 0, 1 / + 2, 3.
//
// Dequantization: `word >> 4i` then one lop3 put codes i and i + 4 into the mantissa of bf16 128.0: the
// pair (128 + q) exactly, 7 instructions per 8 codes. The zero point and the 128 are removed per group,
// not per code: the MMA's fp32 sum over the group is sum x (128 + q), and its accumulator starts at
// -136 * sum x (computed once per CTA in fp32 from the staged x), so that it ends at sum x (q - 8). The
// group's scale then multiplies that fp32 partial (exllama's order); w is never rounded.
//
// Work: units of (cg, part of K). The host's plan cuts K into R ranges, each into `ppr` parts, and gives
// each range P CTAs (one per SM, one wave); a CTA stages x for its range in shared memory once and its 8
// warps take consecutive runs of its units. A warp streams its run's chunks through its own ring of D
// slots: lane 0 issues the TMA copy of a chunk into a slot (an mbarrier per slot counts its bytes), the
// warp waits on that slot's mbarrier, copies the chunk into registers and hands the slot straight back to
// the TMA for the chunk D further on. With one part per cg the unit's result goes to y; otherwise to the
// workspace as fp32 (in the MMA fragment's order), and the last warp to finish a cg (an atomic counter per
// cg, in the prepared state, re-armed by that warp) adds the cg's parts in part order and writes y.
// Deterministic: every sum's order is fixed by the plan.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "layout.cuh"
#include "ptx.cuh"

namespace w4a16::stream {

constexpr int kChunkChannels = 64;
constexpr int kChunkCodeBytes = kChunkChannels * kGroup / 2;          // 4096
constexpr int kChunkBytes = kChunkCodeBytes + kChunkChannels * 2;     // 4224: codes + scales
constexpr int kWarps = 8;                                              // per CTA, one CTA per SM
constexpr int kThreads = kWarps * 32;
constexpr int kMaxSlots = 6;                                           // ring slots per warp, at most
constexpr int kMinSlots = 3;                                           // the plan keeps at least this many
constexpr int kBarBytes = 1024;                                        // kWarps x kMaxSlots mbarriers, padded
constexpr int kXRowPad = 64;       // x rows are 64 bytes longer than their values: 8 rows of a warp's
                                   // 16-byte reads fall on alternate bank halves (conflict-free)
constexpr int kMinSmem = 120 * 1024;  // more than half an SM's shared memory: one CTA per SM
constexpr int kMaxM = 16;
static_assert(kWarps * kMaxSlots * 8 <= kBarBytes, "the mbarriers fit their area");
static_assert(kChunkBytes % 128 == 0, "slots stay 128-byte aligned");

struct StreamLayout {
  int N, K, G, NCG;  // G: K groups; NCG: 64-channel blocks
  __host__ __device__ static StreamLayout of(int N, int K) { return StreamLayout{N, K, K / kGroup, (N + 63) / 64}; }
  __host__ __device__ size_t bytes() const { return (size_t)NCG * G * kChunkBytes; }
};

__host__ __device__ inline size_t chunk_offset(const StreamLayout& L, int cg, int grp) {
  return ((size_t)cg * L.G + grp) * kChunkBytes;
}

// Which code nibble `nibble` (bits 4 nibble .. 4 nibble + 3) of word `cb` of lane `lane` at k16 step `step`
// of a chunk holds: its K offset inside the group and its channel inside the cg. `word >> 4i` (i < 4) puts
// nibbles i and i + 4 at bits 0 and 16: register i of the A fragment, elements (low, high) =
// (nibble i, nibble i + 4). Register 0: row g, columns 2t, 2t+1; 1: row g + 8, same columns; 2: row g,
// columns 2t + 8, 2t + 9; 3: row g + 8, same; through the K permutation above.
struct Place {
  int k, ch;
};
__host__ __device__ inline Place code_place(int step, int lane, int cb, int nibble) {
  const int g = lane / 4, t = lane % 4, blk = step / 2, h = step % 2;
  const int reg = nibble % 4, hi = nibble / 4;
  return Place{32 * blk + 8 * t + 4 * h + 2 * (reg >> 1) + hi, 16 * cb + g + 8 * (reg & 1)};
}

// Word `index` of the prepared buffer (index = chunk * 1056 + w). Words 0..1023 of a chunk are codes;
// words 1024..1055 the scales: word 1024 + 4 g + cb holds the scales of channels 16 cb + g (low half) and
// 16 cb + g + 8 (high half), so that lane (g, t) reads its 8 scales with one 16-byte load at 4096 + 16 g.
// Channels past N get code 8 and scale 0.
__host__ __device__ inline uint32_t chunk_word(const uint32_t* qweight, const uint16_t* scales, const StreamLayout& L,
                                               size_t index) {
  constexpr int kWords = kChunkBytes / 4, kCodeWords = kChunkCodeBytes / 4;
  const size_t chunk = index / kWords;
  const int w = (int)(index % kWords);
  const int cg = (int)(chunk / L.G), grp = (int)(chunk % L.G);
  const int n0 = cg * kChunkChannels, k0 = grp * kGroup;
  uint32_t out = 0;
  if (w < kCodeWords) {
    const int step = w / 128, lane = w / 4 % 32, cb = w % 4;
    for (int nibble = 0; nibble < 8; ++nibble) {
      const Place at = code_place(step, lane, cb, nibble);
      out |= gptq_code(qweight, L.N, k0 + at.k, n0 + at.ch) << (4 * nibble);
    }
  } else {
    const int s = w - kCodeWords, g = s / 4, cb = s % 4;
    for (int r = 0; r < 2; ++r) {
      const int n = n0 + 16 * cb + g + 8 * r;
      const uint32_t bits = n < L.N ? scales[(size_t)grp * L.N + n] : 0u;
      out |= bits << (16 * r);
    }
  }
  return out;
}

__global__ void prepare_stream(const uint32_t* __restrict__ qweight, const uint16_t* __restrict__ scales, StreamLayout L,
                               uint32_t* __restrict__ out) {
  const size_t words = L.bytes() / 4;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    out[i] = chunk_word(qweight, scales, L, i);
}

// ---- The plan (host) and the work it gives each CTA and warp (host and device) ----

struct Plan {
  int R;      // K ranges
  int ppr;    // parts per range (units per cg and range)
  int P;      // CTAs per range; the grid is R x P
  int D;      // ring slots per warp
  int lmax;   // groups in the longest range (sizes x's staging)
  int parts;  // R * ppr: the K splits of every cg
  int smem;   // dynamic shared memory bytes
};

__host__ __device__ inline int split_point(int i, int n, int parts) { return (int)((long long)i * n / parts); }

struct CtaWork {
  int r, gb, ge;  // the range and its groups [gb, ge)
  int ub, ue;     // its units [ub, ue) among the range's NCG * ppr (unit u: cg u / ppr, part u % ppr)
};
__host__ __device__ inline CtaWork cta_work(const Plan& pl, const StreamLayout& L, int cta) {
  const int r = cta / pl.P, p = cta % pl.P, units = L.NCG * pl.ppr;
  return CtaWork{r, split_point(r, L.G, pl.R), split_point(r + 1, L.G, pl.R), split_point(p, units, pl.P),
                 split_point(p + 1, units, pl.P)};
}
__host__ __device__ inline void warp_units(const CtaWork& cw, int warp, int* begin, int* end) {
  const int n = cw.ue - cw.ub;
  *begin = cw.ub + split_point(warp, n, kWarps);
  *end = cw.ub + split_point(warp + 1, n, kWarps);
}
struct Unit {
  int cg, part, gb, ge;  // part: 0 .. parts - 1 over the whole K; groups [gb, ge)
};
__host__ __device__ inline Unit unit_of(const Plan& pl, const CtaWork& cw, int u) {
  const int cg = u / pl.ppr, j = u % pl.ppr, len = cw.ge - cw.gb;
  return Unit{cg, cw.r * pl.ppr + j, cw.gb + split_point(j, len, pl.ppr), cw.gb + split_point(j + 1, len, pl.ppr)};
}
// The workspace: per (cg, part, n8 tile, lane) 16 floats, the lane's accumulators in (cb, element) order.
__host__ __device__ inline size_t partial_index(int parts, int nt_count, int cg, int part, int nt, int lane) {
  return ((((size_t)cg * parts + part) * nt_count + nt) * 32 + lane) * 16;
}
inline int n8_tiles(int M) { return M <= 8 ? 1 : 2; }
inline size_t workspace_bytes(const Plan& pl, const StreamLayout& L, int M) {
  return pl.parts > 1 ? sizeof(float) * (size_t)L.NCG * pl.parts * n8_tiles(M) * 32 * 16 : 0;
}
__host__ __device__ inline int x_row_bytes(int lmax) { return lmax * kGroup * 2 + kXRowPad; }
__host__ __device__ inline int x_stage_bytes(int M, int lmax) { return lmax * 16 * 4 + M * x_row_bytes(lmax); }

// Chooses R, ppr, P (and D) for M x N x K on `sms` SMs with `max_smem` bytes of shared memory per CTA.
// Cost in chunks of the busiest SM: its chunks, or its busiest warp's times a factor (a warp alone cannot
// draw a whole SM's share of the bandwidth), plus the fp32 partials it writes and reads (L2 traffic) and
// the x it stages (L2 traffic, and the prologue's latency), weighted by half. Ties go to fewer parts.
// Returns false if nothing fits.
inline bool make_plan(int M, const StreamLayout& L, int sms, int max_smem, Plan* out) {
  constexpr double kWarpFactor = 3.0, kPartialWeight = 0.5, kXWeight = 0.5;
  const int G = L.G, NCG = L.NCG;
  bool found = false;
  double best_cost = 0;
  for (int R = 1; R <= G; ++R) {
    const int lmax = (G + R - 1) / R, lmin = G / R;
    const int fixed = kBarBytes + x_stage_bytes(M, lmax);
    if (fixed + kWarps * kMinSlots * kChunkBytes > max_smem) continue;
    const int P0 = sms / R;
    if (P0 == 0) break;
    for (int ppr = 1; ppr <= lmin; ++ppr) {
      const int units = NCG * ppr, P = std::min(P0, units);
      const int umax = (units + P - 1) / P, plen = (lmax + ppr - 1) / ppr;
      const double cta = (double)umax * plen, warp = (double)((umax + kWarps - 1) / kWarps) * plen;
      const int parts = R * ppr;
      const int m_even = std::min(M + (M & 1), kMaxM);
      const double partial = parts > 1 ? umax * kPartialWeight * m_even * 64.0 * 4 * 2 / kChunkBytes : 0.0;
      const double cost = std::max(cta, kWarpFactor * warp) + partial + kXWeight * x_stage_bytes(M, lmax) / kChunkBytes;
      if (!found || cost < best_cost || (cost == best_cost && parts < out->parts)) {
        const int warp_chunks = (umax + kWarps - 1) / kWarps * plen;
        const int fit = (max_smem - fixed) / (kWarps * kChunkBytes);
        const int D = std::max(1, std::min({kMaxSlots, fit, warp_chunks}));
        const int smem = std::min(max_smem, std::max(kMinSmem, fixed + kWarps * D * kChunkBytes));
        *out = Plan{R, ppr, P, D, lmax, parts, smem};
        best_cost = cost;
        found = true;
      }
    }
  }
  return found;
}

// ---- The kernel ----

struct Params {
  const __nv_bfloat16* x;       // [M, K]
  const unsigned char* weight;  // prepared (prepare_stream)
  __nv_bfloat16* y;             // [M, N]
  float* partial;               // workspace, when plan.parts > 1
  int* counters;                // one per cg, zero between calls
  StreamLayout L;
  Plan plan;
  int M;
};

__device__ __forceinline__ float bf16_low(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float bf16_high(uint32_t pair) { return __uint_as_float(pair & 0xffff0000u); }

// One chunk's math: 8 k16 steps x 4 channel blocks x NT token tiles of m16n8k16, the accumulators starting at
// -136 * sum x, then the group's scales applied to the fp32 result and added to the unit's totals.
template <int NT>
__device__ __forceinline__ void chunk_math(const uint4 (&wq)[8], uint4 sc, uint32_t xrow, int xrb, uint32_t xneg_at, int M,
                                           int g, float (&tot)[4][NT][4]) {
  float2 xn[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) xn[nt] = lds_64f(xneg_at + nt * 8 * 4);
  float acc[4][NT][4];
#pragma unroll
  for (int kb = 0; kb < 4; ++kb) {
    uint4 xv[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      xv[nt] = make_uint4(0u, 0u, 0u, 0u);
      if (nt * 8 + g < M) xv[nt] = lds_128(xrow + nt * 8 * xrb + kb * 64);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint4 q = wq[2 * kb + h];
      const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int cb = 0; cb < 4; ++cb) {
        const uint32_t a[4] = {biased_pair(words[cb]), biased_pair(words[cb] >> 4), biased_pair(words[cb] >> 8),
                               biased_pair(words[cb] >> 12)};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const uint32_t b0 = h ? xv[nt].z : xv[nt].x, b1 = h ? xv[nt].w : xv[nt].y;
          if (kb == 0 && h == 0)
            mma_bf16_16816_c(acc[cb][nt], a, b0, b1, xn[nt].x, xn[nt].y, xn[nt].x, xn[nt].y);
          else
            mma_bf16_16816_c(acc[cb][nt], a, b0, b1, acc[cb][nt][0], acc[cb][nt][1], acc[cb][nt][2], acc[cb][nt][3]);
        }
      }
    }
  }
  const uint32_t sw[4] = {sc.x, sc.y, sc.z, sc.w};
#pragma unroll
  for (int cb = 0; cb < 4; ++cb) {
    const float s_lo = bf16_low(sw[cb]), s_hi = bf16_high(sw[cb]);  // channels 16 cb + g and + 8
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      tot[cb][nt][0] = fmaf(s_lo, acc[cb][nt][0], tot[cb][nt][0]);
      tot[cb][nt][1] = fmaf(s_lo, acc[cb][nt][1], tot[cb][nt][1]);
      tot[cb][nt][2] = fmaf(s_hi, acc[cb][nt][2], tot[cb][nt][2]);
      tot[cb][nt][3] = fmaf(s_hi, acc[cb][nt][3], tot[cb][nt][3]);
    }
  }
}

// Element e of accumulator (cb, nt) of lane (g, t): token nt * 8 + 2t + (e & 1), channel 16 cb + g + 8 (e >> 1).
template <int NT>
__device__ __forceinline__ void store_y(const Params& p, int cg, int g, int t, const float (&v)[4][NT][4]) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int cb = 0; cb < 4; ++cb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = nt * 8 + 2 * t + (e & 1), n = cg * kChunkChannels + 16 * cb + g + 8 * (e >> 1);
        if (m < p.M && n < p.L.N) p.y[(size_t)m * p.L.N + n] = __float2bfloat16_rn(v[cb][nt][e]);
      }
}

template <int NT>
__global__ void __launch_bounds__(kThreads, 1) w4a16_stream(Params p) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const Plan& pl = p.plan;
  const StreamLayout& L = p.L;
  const CtaWork cw = cta_work(pl, L, blockIdx.x);
  const int len = cw.ge - cw.gb;
  int wb, we;
  warp_units(cw, warp, &wb, &we);

  const uint32_t sbase = smem_address(smem);
  const uint32_t bar0 = sbase + warp * kMaxSlots * 8;
  const uint32_t ring0 = sbase + kBarBytes + warp * pl.D * kChunkBytes;
  const uint32_t xneg = sbase + kBarBytes + kWarps * pl.D * kChunkBytes;  // [lmax][16] floats: -136 sum x
  float* xneg_ptr = reinterpret_cast<float*>(smem + kBarBytes + kWarps * pl.D * kChunkBytes);
  const uint32_t xs = xneg + pl.lmax * 16 * 4;                             // [M][x_row_bytes] bf16
  const int xrb = x_row_bytes(pl.lmax);
  const uint64_t policy = evict_first_policy();

  // The producer's cursor (kept by every lane, used by lane 0): unit pu, group pgrp.
  int pun = wb, pgrp = 0;
  Unit pu{0, 0, 0, 0};
  if (wb < we) {
    pu = unit_of(pl, cw, wb);
    pgrp = pu.gb;
  }
  auto advance = [&]() {
    if (++pgrp == pu.ge && ++pun < we) {
      pu = unit_of(pl, cw, pun);
      pgrp = pu.gb;
    }
  };
  auto issue = [&](int slot) {  // lane 0
    const uint32_t bar = bar0 + slot * 8;
    mbar_arrive_expect_tx(bar, kChunkBytes);
    tma_load_1d(ring0 + slot * kChunkBytes, p.weight + chunk_offset(L, pu.cg, pgrp), kChunkBytes, bar, policy);
  };

  // Prologue: the ring's first D chunks are on their way before x is staged.
  if (lane == 0) {
    for (int s = 0; s < pl.D; ++s) mbar_init(bar0 + 8 * s, 1);
    fence_barrier_init();
  }
  __syncwarp();
  for (int s = 0; s < pl.D && pun < we; ++s) {
    if (lane == 0) issue(s);
    advance();
  }

  // x's rows for this range, then -136 * sum x per group and token (tokens past M: 0).
  const int row_pieces = len * (kGroup * 2 / 16);
  for (int c = tid; c < p.M * row_pieces; c += kThreads) {
    const int m = c / row_pieces, q = c % row_pieces;
    cp_async_16_or_zero(xs + m * xrb + q * 16, p.x + (size_t)m * L.K + (size_t)cw.gb * kGroup + q * 8, true);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  for (int i = tid; i < len * 16; i += kThreads) {
    const int grp = i / 16, m = i % 16;
    float sum = 0.0f;
    if (m < p.M) {
      float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4
      for (int q = 0; q < 16; ++q) {
        const uint4 v = lds_128(xs + m * xrb + grp * kGroup * 2 + q * 16);
        part[0] += bf16_low(v.x) + bf16_high(v.x);
        part[1] += bf16_low(v.y) + bf16_high(v.y);
        part[2] += bf16_low(v.z) + bf16_high(v.z);
        part[3] += bf16_low(v.w) + bf16_high(v.w);
      }
      sum = (part[0] + part[1]) + (part[2] + part[3]);
    }
    xneg_ptr[i] = -136.0f * sum;
  }
  __syncthreads();

  // The warp's units. No block-wide barrier from here on.
  const uint32_t xlane = xs + g * xrb + t * 16;  // + 8 xrb for the second n8 tile, + 256 per group, + 64 per 32 K
  int slot = 0;
  uint32_t phase = 0;
  for (int u = wb; u < we; ++u) {
    const Unit un = unit_of(pl, cw, u);
    float tot[4][NT][4];
#pragma unroll
    for (int cb = 0; cb < 4; ++cb)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) tot[cb][nt][e] = 0.0f;

    for (int grp = un.gb; grp < un.ge; ++grp) {
      const uint32_t bar = bar0 + slot * 8, buf = ring0 + slot * kChunkBytes;
      mbar_wait(bar, phase);
      uint4 wq[8];
#pragma unroll
      for (int s = 0; s < 8; ++s) wq[s] = lds_128(buf + s * 512 + lane * 16);
      const uint4 sc = lds_128(buf + kChunkCodeBytes + g * 16);
      // The slot goes back to the TMA: the chunk D further on.
      __syncwarp();
      if (pun < we) {
        if (lane == 0) {
          fence_proxy_async_shared();
          issue(slot);
        }
        advance();
      }
      if (++slot == pl.D) {
        slot = 0;
        phase ^= 1u;
      }
      const int gl = grp - cw.gb;
      chunk_math<NT>(wq, sc, xlane + gl * kGroup * 2, xrb, xneg + (gl * 16 + 2 * t) * 4, p.M, g, tot);
    }

    if (pl.parts == 1) {
      store_y<NT>(p, un.cg, g, t, tot);
      continue;
    }
    // Split K: this part's fp32 partial, then the cg's last part to finish adds them all in part order.
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      if (nt * 8 + 2 * t >= p.M) continue;  // no token of this lane in this tile
      float4* dst = reinterpret_cast<float4*>(p.partial + partial_index(pl.parts, NT, un.cg, un.part, nt, lane));
#pragma unroll
      for (int cb = 0; cb < 4; ++cb) dst[cb] = make_float4(tot[cb][nt][0], tot[cb][nt][1], tot[cb][nt][2], tot[cb][nt][3]);
    }
    __threadfence();
    __syncwarp();
    int before = 0;
    if (lane == 0) before = atomicAdd(p.counters + un.cg, 1);
    before = __shfl_sync(0xffffffffu, before, 0);
    if (before != pl.parts - 1) continue;
    __threadfence();
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      if (nt * 8 + 2 * t >= p.M) continue;
      float4 sum[4];
#pragma unroll
      for (int cb = 0; cb < 4; ++cb)
        sum[cb] = __ldcg(reinterpret_cast<const float4*>(p.partial + partial_index(pl.parts, NT, un.cg, 0, nt, lane)) + cb);
      for (int q = 1; q < pl.parts; ++q) {
        const float4* src = reinterpret_cast<const float4*>(p.partial + partial_index(pl.parts, NT, un.cg, q, nt, lane));
#pragma unroll
        for (int cb = 0; cb < 4; ++cb) {
          const float4 v = __ldcg(src + cb);
          sum[cb].x += v.x, sum[cb].y += v.y, sum[cb].z += v.z, sum[cb].w += v.w;
        }
      }
#pragma unroll
      for (int cb = 0; cb < 4; ++cb) {
        tot[cb][nt][0] = sum[cb].x, tot[cb][nt][1] = sum[cb].y, tot[cb][nt][2] = sum[cb].z, tot[cb][nt][3] = sum[cb].w;
      }
    }
    store_y<NT>(p, un.cg, g, t, tot);
    if (lane == 0) p.counters[un.cg] = 0;  // re-armed for the next call (stream order follows)
  }
}

}  // namespace w4a16::stream
