// quant/rmsnorm_fp8_quant, expert CUDA solution for the H200 (sm_90a), version 2.
//
// The arithmetic of every path: sum the squares of the bf16 inputs in fp32, inv = rsqrt(sum / H + eps),
// y = bf16(bf16(x * inv) * w) with packed bf16 arithmetic, amax of |y| (exact, packed max), the scale
// max(amax, 2^-9) / 448 correctly rounded, and q = e4m3(y * 448 / amax) through an approximate
// reciprocal whose product is snapped to the fp8 midpoints (exact quotient, below). Each element of x
// is read once and q written once: DRAM sees the floor's bytes.
//
// Three kernels, chosen by the layout and the row count:
// - rmsnorm_quant_rows (v2, many rows: T >= 1024 and 16-byte rows of up to 8192): a group of 1, 2 or 4
//   warps per row, 8 warps per CTA, no CTA barrier between a row's load and its store, a persistent
//   grid that walks the rows, the weight staged once per CTA in shared memory, and the next row loaded
//   while the current one is quantized. Its section below says why.
// - rmsnorm_quant_vec (v1, fewer rows): one CTA per row, 1 vector a thread below 264 rows (latency:
//   T = 1 measured 4.6 us), 4 from there; two block reductions, one barrier each.
// - rmsnorm_quant_strided (v1.1, any other layout: H not a multiple of 8, strided or misaligned rows).
// The row-group kernel forms the sum of squares in exactly vec<4>'s order, so v2's outputs are
// bit-identical to v1's for the same input on every path.
//
// Why v2 (profile of v1 at T2048 in notes.md): v1 runs a CTA of 128 threads per row, about 7 resident
// per SM, each loading its row, reducing twice behind barriers and storing with nothing of its own to
// overlap: 43% occupancy, DRAM 35%, SM 43%, latency bound (11.3 us for a 5.55 us floor; T16384 82.6%,
// 70B 74.6% of the floor). Its SASS spends about 18 instructions per element (576 per thread of 32
// elements: the element path, two block reductions, barriers, per-row addressing and guards).
// v2's loop spends 12.6-12.8 per element (814 per thread-row of 64 elements at H 4096, 821 at 8192),
// every SM holds 16 rows of 8 KB (8 of 16 KB) in flight at 64 registers (32 warps), Little's law asks
// for about 32 KB per SM (4.2 TB/s x ~1 us / 132 SMs), and T2048's 2048 rows are a single wave.
//
// Prediction, written before the first GPU run (measured 2026-12-03, notes.md: T2048 11.4 us, no gain:
// every row in flight at once leaves nothing to overlap; T16384 51.5 us; 70B 27.0 us). Cold L2,
// medians; floors at the 4538 GB/s read rate as in notes.md; about 2.5 us of launch, first round trip
// and drain on top of the stream, as T1's 4.6 us suggests:
// - llama3-8b-T2048 (25.2 MB): 2048 rows all issued at once, streamed at 4.2-4.5 TB/s (5.6-6.0 us),
//   plus the launch and the last rows' work (a thread-row is 814 instructions, ~0.4 us): ~8 us, 69%
//   of the floor (bar 60%; v1 11.3 us).
// - llama3-8b-T16384 (201.4 MB): 8 rows per group, steady state at ~4.2 TB/s: 48 us + 2.5 = ~50.5 us,
//   88% (bar 85%; v1 53.7 us).
// - llama3-70b-T4096 (100.7 MB): 4 rows per group at ~4.2 TB/s: 24 us + 2.5 = ~26.5 us, 84% (bar 85%:
//   at the edge; v1 29.7 us).
// - T1, T5 (odd H), T37, T333: unchanged v1 paths (4.6, 4.6, 4.7, 5.6 us measured).
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr int kVecElems = 8;          // bf16 per 16-byte vector
constexpr int kMaxThreads = 1024;
constexpr int kStridedThreads = 256;
constexpr float kFp8Max = 448.0f;
constexpr float kAmaxFloor = 0x1p-9f;  // amax / 448 is clamped at 1 / (448 * 512): amax at 2^-9

struct Params {
  const __nv_bfloat16* x;
  const __nv_bfloat16* w;
  uint8_t* q;
  float* scales;
  int64_t x_row, x_col;  // strides in elements (the vector path needs x_col == 1)
  int64_t w_col;
  int64_t q_row, q_col;
  int64_t s_row;
  int hidden;
  int vecs;  // hidden / 8, vector path only
  float inv_hidden;  // 1 / H: the mean of the squares as a product (within an ulp of vLLM's quotient)
  float eps;
};

// Read-only path, allowed to allocate in L1: the weight is read by every row of an SM.
__device__ __forceinline__ uint4 load_readonly(const void* ptr) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// One barrier per reduction: every warp reduces the per-warp partials itself, so nothing is broadcast
// after it. The two reductions of a row use different slots, so the second cannot overwrite partials a
// slow warp is still reading from the first. blockDim.x is a multiple of 32.
__device__ __forceinline__ float block_sum(float v, float* partial) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  return warp_sum(lane < static_cast<int>(blockDim.x >> 5) ? partial[lane] : 0.0f);
}

__device__ __forceinline__ float block_max(float v, float* partial) {
  v = warp_max(v);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  return warp_max(lane < static_cast<int>(blockDim.x >> 5) ? partial[lane] : 0.0f);
}

// Rounds to the nearest multiple of 32 ulps. An fp8 e4m3 rounding midpoint has at most 5 significant
// bits, so it is such a multiple: a quotient within 16 ulps of a midpoint lands exactly on it, and any
// other one moves by less than 2e-6 (relative), far less than its distance to the nearest midpoint.
__device__ __forceinline__ float snap_to_midpoints(float v) {
  return __uint_as_float((__float_as_uint(v) + 16u) & ~31u);
}

__device__ __forceinline__ float reciprocal_approx(float b) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(b));
  return r;
}

// The multiplier 448 / amax (amax already floored at 2^-9), within two ulps. The approximate reciprocal
// flushes to zero above 2^126, where only the correctly rounded division (always a normal float here)
// will do; no realistic row gets there, so the branch is uniform and never taken.
__device__ __forceinline__ float multiplier_for(float floored) {
  return floored < 0x1p126f ? kFp8Max * reciprocal_approx(floored) : kFp8Max / floored;
}

// The same two numbers without a subroutine call, for the row-group kernel: the IEEE division's slow
// path is a CALL, and in a loop every value live across it is saved to local memory (16-72 bytes of
// "spills" per ptxas). The scale: Markstein's correction of a * RN(1/448) is the correctly rounded
// a / 448; checked against IEEE division for every float from 2^-9 (the floor) up (1.15e9 values,
// 0 differences), so the scales are bit-identical to v1's.
__device__ __forceinline__ float scale_for(float floored) {
  constexpr float kInvFp8Max = static_cast<float>(1.0 / 448.0);  // RN(1/448)
  const float q0 = __fmul_rn(floored, kInvFp8Max);
  const float r = fmaf(-q0, kFp8Max, floored);
  return fmaf(r, kInvFp8Max, q0);
}

// The multiplier: where v1 divides (amax of 2^126 or more), the approximate reciprocal of amax / 256
// instead, scaled back: within a few ulps of 448 / amax like the main path, which the midpoint snap
// absorbs (quotient below), so q is the same as v1's.
__device__ __forceinline__ float multiplier_without_call(float floored) {
  return floored < 0x1p126f ? kFp8Max * reciprocal_approx(floored)
                            : kFp8Max * reciprocal_approx(floored * 0x1p-8f) * 0x1p-8f;
}

// The quotient y * 448 / amax for the fp8 conversion. y and amax are bf16 values, so the exact
// quotient is either an fp8 rounding midpoint or at least 1.2e-4 (relative) away from every one
// (448 y / amax = 7 a / b * 2^k for 8-bit integers a, b; a midpoint is an odd integer below 32 times a
// power of two). y * multiplier is within a few ulps of the exact quotient and the snap restores exact
// midpoints: the conversion then rounds as the exact quotient does.
__device__ __forceinline__ float quotient(float y, float multiplier) { return snap_to_midpoints(y * multiplier); }

// Saturating round-to-nearest-even conversion of two values, the first at the lower address.
__device__ __forceinline__ uint32_t to_e4m3x2(float a, float b) {
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}

// bf16 pairs are kept as raw 32-bit words (the element at the lower address in the low half): unpacking
// is a shift or a mask, and packed bf16 arithmetic works on the words directly.
__device__ __forceinline__ float low_of(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float high_of(uint32_t pair) { return __uint_as_float(pair & 0xffff0000u); }

// The same two unpackings as byte permutes. ptxas merges identical computations of the same register,
// so a row whose words are unpacked with shifts for the sum of squares and again for y would keep all
// the unpacked floats alive across the reduction (twice the row's registers); unpacking the second
// time with a different instruction makes it recompute them instead.
__device__ __forceinline__ float low_of_prmt(uint32_t pair) {
  uint32_t v;
  asm("prmt.b32 %0, %1, 0, 0x1044;" : "=r"(v) : "r"(pair));
  return __uint_as_float(v);
}
__device__ __forceinline__ float high_of_prmt(uint32_t pair) {
  uint32_t v;
  asm("prmt.b32 %0, %1, 0, 0x3244;" : "=r"(v) : "r"(pair));
  return __uint_as_float(v);
}

// Two floats rounded to nearest even into one bf16 pair.
__device__ __forceinline__ uint32_t to_bf16x2(float low, float high) {
  uint32_t pair;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(pair) : "f"(high), "f"(low));
  return pair;
}

// The product of two bf16 pairs, each rounded once to bf16 (exact product, one rounding).
__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t product;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(product) : "r"(a), "r"(b));
  return product;
}

// Element-wise max of two bf16 pairs of magnitudes (both non-negative).
__device__ __forceinline__ uint32_t max_bf16x2(uint32_t a, uint32_t b) {
  uint32_t m;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(m) : "r"(a), "r"(b));
  return m;
}

// The vector path: thread i owns vectors i, i + blockDim.x, ... of the row (kVecs of them), so each
// warp's loads and stores are contiguous. Threads past the row's end hold zeros, which add nothing to
// either reduction.
template <int kVecs>
__global__ void __launch_bounds__(kMaxThreads) rmsnorm_quant_vec(Params p) {
  __shared__ float partial_sum[32], partial_max[32];
  const int64_t row = blockIdx.x;
  // This thread's first vector of the row, of the weight and of q; vector k is k * blockDim.x further.
  const uint4* x = reinterpret_cast<const uint4*>(p.x + row * p.x_row) + threadIdx.x;
  const uint4* w = reinterpret_cast<const uint4*>(p.w) + threadIdx.x;
  uint2* q = reinterpret_cast<uint2*>(p.q + row * p.q_row) + threadIdx.x;
  const int stride = blockDim.x;
  const int own = p.vecs - static_cast<int>(threadIdx.x);  // vector k exists when k * stride < own

  uint4 xv[kVecs], wv[kVecs];
  // Every load of the row is issued before the first is used.
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    xv[k] = make_uint4(0, 0, 0, 0);
    wv[k] = make_uint4(0, 0, 0, 0);
    if (k * stride < own) {
      xv[k] = load_readonly(x + k * stride);
      wv[k] = load_readonly(w + k * stride);
    }
  }

  float sum_sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const uint32_t words[4] = {xv[k].x, xv[k].y, xv[k].z, xv[k].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float lo = low_of(words[j]), hi = high_of(words[j]);
      sum_sq = fmaf(lo, lo, sum_sq);
      sum_sq = fmaf(hi, hi, sum_sq);
    }
  }
  sum_sq = block_sum(sum_sq, partial_sum);
  const float inv = rsqrtf(sum_sq * p.inv_hidden + p.eps);

  // y = bf16(bf16(x * inv) * w), in place of x: one conversion of a pair of products to bf16, then one
  // bf16x2 multiply (the product of two bf16 values is exact in fp32, so its single rounding is the
  // specification's fp32 product rounded to bf16). The amax of |y| is exact in bf16.
  uint32_t amax2 = 0;
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    uint32_t words[4] = {xv[k].x, xv[k].y, xv[k].z, xv[k].w};
    const uint32_t weights[4] = {wv[k].x, wv[k].y, wv[k].z, wv[k].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t normed = to_bf16x2(low_of(words[j]) * inv, high_of(words[j]) * inv);
      words[j] = mul_bf16x2(normed, weights[j]);
      amax2 = max_bf16x2(amax2, words[j] & 0x7fff7fffu);
    }
    xv[k] = make_uint4(words[0], words[1], words[2], words[3]);
  }
  const float amax = block_max(fmaxf(low_of(amax2), high_of(amax2)), partial_max);

  const float floored = fmaxf(amax, kAmaxFloor);
  if (threadIdx.x == 0) p.scales[row * p.s_row] = floored / kFp8Max;  // correctly rounded
  const float multiplier = multiplier_for(floored);

#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    if (k * stride < own) {
      const uint32_t words[4] = {xv[k].x, xv[k].y, xv[k].z, xv[k].w};
      uint32_t packed[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        packed[j] = to_e4m3x2(quotient(low_of(words[j]), multiplier), quotient(high_of(words[j]), multiplier));
      }
      q[k * stride] = make_uint2(packed[0] | (packed[1] << 16), packed[2] | (packed[3] << 16));
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// v2: the row-group kernel. A group of kG warps owns a row at a time and each thread holds kV = 4 * kA
// 16-byte vectors of it (vector k of group-thread g is g + k * 32 * kG: a warp's accesses are contiguous
// 512-byte runs, as in v1). kA = 2 where the width allows: 64 elements a thread, so a row's serial work
// is short (the last rows of a one-wave launch such as T2048 finish about 0.4 us after their data) while
// the per-row costs (reductions, rsqrt, scale, addressing) are spread over twice v1's elements.
// Dispatch by v1's warps per row W1 = ceil(H / 1024): H 4096 -> 2 warps per row, H 8192 -> 4 (and
// W1 1, 2, 3 -> 1 warp with kA = W1; 6 -> 2 warps with kA = 3; 5, 7 or more stay on v1).
// - No CTA barrier per row: a CTA of 8 warps holds 8 / kG rows, and only the kG warps of a row meet
//   (a named barrier per group, twice per row: the sum of squares and the amax, each through its own
//   shared-memory slot, so a fast warp never overwrites a value its partner has yet to read).
// - Persistent grid: the CTAs resident at once (occupancy API, asked once), each group walking rows
//   with the grid's stride; the grid is trimmed so that every group has the same number of rows.
// - The weight is copied once per CTA into shared memory (cp.async, zero past the row's end) and read
//   from there (one LDS.128 per 8 elements): v1 and the v2a attempt read it through L1 per row, where
//   the streamed rows evict it (v2a, reading it after the first reduction, measured slower than v1).
// - The first row's loads are issued before the weight's copy. Later rows are loaded while the current
//   one is quantized: once vector k has been converted and stored, its registers take vector k of the
//   next row, so the next load overlaps the quantization at no register cost.
//
// Bit-identical to v1's rmsnorm_quant_vec<4>: the only order-dependent quantity is the fp32 sum of
// squares, and it is formed in v1's order. v1 (4 vectors a thread, blockDim = 32 * W1) gives vector v
// to lane v % 32 of warp (v / 32) % W1 as its (v / (32 * W1))-th vector; here vector v = g + 32 * kG * k'
// lands in the same lane, so each lane keeps kA = W1 / kG accumulators, accumulator a taking the
// vectors v1's warp (member + kG * a) sums, in v1's order. Each is reduced over the warp with v1's
// butterfly, then the W1 warp totals are combined with the tree v1's second butterfly (over lanes
// 0..W1-1 of a warp, the rest zero) forms: tree_value below rebuilds it at compile time, skipping the
// additions of zero (exact: the partial sums are never -0). With kG > 1 the last log2(kG) levels of
// that tree combine the warps' subtrees, after the exchange. A host emulation of both orders (2560
// random rows over every dispatched shape, ragged ones included) found no difference.
constexpr int kRowWarps = 8;                      // warps per CTA of the row-group kernel
constexpr int kRowThreads = 32 * kRowWarps;
constexpr int kRowGroupMinRows = 1024;            // below this, v1's CTA per row (one wave, short rows)

// Registers per thread of the row-group kernel (__maxnreg__; __launch_bounds__ cannot be given as well).
// A thread's share of the row is 4 * kA uint4 (32 registers at kA = 2). At 64 registers 4 CTAs of 256
// threads are resident per SM (32 warps: 16 rows of 8 KB or 8 of 16 KB in flight), at 80 three, at 104
// two. ptxas (CUDA 13.0) schedules to whatever cap it is given and at some caps then spills a few
// values; these caps give every instantiation no local memory at all (-Xptxas -v). The ragged
// variants (a row that is not exactly 4 * kA vectors a thread) need more for their guards.
__host__ __device__ constexpr int row_registers(int a, bool full) { return !full ? 104 : a <= 2 ? 64 : 80; }

// Whether lane i of v1's second butterfly holds a non-zero value after `level` of its 5 stages (stage s
// adds the value of lane i ^ (16 >> s)); before the first stage lanes 0..w-1 hold the warps' totals.
__host__ __device__ constexpr bool tree_nonzero(int w, int i, int level) {
  return level == 0 ? i < w : tree_nonzero(w, i, level - 1) || tree_nonzero(w, i ^ (16 >> (level - 1)), level - 1);
}

// The value lane kI of that butterfly holds after kLevel stages; warp total w is p[w >> kShift] (with
// kShift = 1 a warp of a pair holds every other total, and only the structure, never kI's lowest bit,
// decides which additions happen, so the same tree serves both warps).
template <int kW, int kI, int kLevel, int kShift, int kA>
__device__ __forceinline__ float tree_value(const float (&p)[kA]) {
  if constexpr (kLevel == 0) {
    static_assert((kI >> kShift) < kA, "leaf outside the partials");
    return p[kI >> kShift];
  } else {
    constexpr int kJ = kI ^ (16 >> (kLevel - 1));
    constexpr bool kMine = tree_nonzero(kW, kI, kLevel - 1), kTheirs = tree_nonzero(kW, kJ, kLevel - 1);
    static_assert(kMine || kTheirs, "an all-zero subtree is never asked for");
    if constexpr (kMine && kTheirs) {
      return tree_value<kW, kI, kLevel - 1, kShift>(p) + tree_value<kW, kJ, kLevel - 1, kShift>(p);
    } else if constexpr (kMine) {
      return tree_value<kW, kI, kLevel - 1, kShift>(p);
    } else {
      return tree_value<kW, kJ, kLevel - 1, kShift>(p);
    }
  }
}

// 16-byte copy global -> shared that bypasses the registers and L1.
__device__ __forceinline__ void copy_async16(void* shared, const void* global) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(address), "l"(global) : "memory");
}

__device__ __forceinline__ void copy_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// The kG warps of a row meet here (named barrier 1 + group; 0 is __syncthreads').
template <int kG>
__device__ __forceinline__ void group_barrier(int group) {
  asm volatile("bar.sync %0, %1;" ::"r"(1 + group), "n"(32 * kG) : "memory");
}

// The last log2(kG) levels of v1's second butterfly, over the kG warps' subtrees (warp h holds lane h's
// value after 5 - log2(kG) levels): lane 0's final value.
template <int kG>
__device__ __forceinline__ float top_of_tree(const float* s) {
  if constexpr (kG == 1) return s[0];
  if constexpr (kG == 2) return s[0] + s[1];
  if constexpr (kG == 4) return (s[0] + s[2]) + (s[1] + s[3]);
}

template <int kG, int kA, bool kFull>
__global__ void __maxnreg__(row_registers(kA, kFull)) rmsnorm_quant_rows(Params p, int64_t rows) {
  static_assert(kG == 1 || kG == 2 || kG == 4, "1, 2 or 4 warps per row");
  constexpr int kLogG = kG == 4 ? 2 : kG == 2 ? 1 : 0;
  static_assert(kRowWarps % kG == 0 && kRowWarps / kG < 16, "named barriers 1..15");
  constexpr int kV = 4 * kA;                // vectors per thread (v1: 4 per thread)
  constexpr int kGroupThreads = 32 * kG;    // stride between a thread's vectors
  constexpr int kGroups = kRowWarps / kG;   // rows in flight per CTA
  __shared__ uint4 w_shared[kV * kGroupThreads];
  __shared__ float exchange_sum[kGroups][kG], exchange_max[kGroups][kG];

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int group = warp / kG;
  const int member = warp % kG;             // which warp of the row's group
  const int first = member * 32 + lane;      // this thread's first vector of a row
  const int own = p.vecs - first;           // vector k exists when k * kGroupThreads < own
  // kFull: the row is exactly kV vectors a thread (Llama-3's 4096 and 8192), no vector is checked.
  auto exists = [&](int k) { return kFull || k * kGroupThreads < own; };
  const int64_t row_step = static_cast<int64_t>(gridDim.x) * kGroups;
  int64_t row = static_cast<int64_t>(blockIdx.x) * kGroups + group;

  auto row_x = [&](int64_t r) { return reinterpret_cast<const uint4*>(p.x + r * p.x_row) + first; };

  // The first row's loads go out before anything else, then the weight's copy into shared memory.
  uint4 xv[kV];
  {
    const uint4* x = row_x(row < rows ? row : 0);
#pragma unroll
    for (int k = 0; k < kV; ++k) {
      xv[k] = make_uint4(0, 0, 0, 0);
      if (row < rows && exists(k)) xv[k] = load_readonly(x + k * kGroupThreads);
    }
  }
  const uint4* w_global = reinterpret_cast<const uint4*>(p.w);
  // Past the row's end the weight is zero, so the y pass reads it unconditionally.
  for (int v = threadIdx.x; v < kV * kGroupThreads; v += kRowThreads) {
    if (v < p.vecs) {
      copy_async16(&w_shared[v], w_global + v);
    } else {
      w_shared[v] = make_uint4(0, 0, 0, 0);
    }
  }
  copy_async_wait_all();
  __syncthreads();  // the only CTA-wide barrier; every warp reaches it before any leaves

  for (; row < rows; row += row_step) {  // uniform per group: its kG warps walk the same rows
    // Sum of squares, in v1's order (header): accumulator a takes k' = a, a + kA, a + 2 kA, a + 3 kA.
    float acc[kA];
#pragma unroll
    for (int a = 0; a < kA; ++a) acc[a] = 0.0f;
#pragma unroll
    for (int k = 0; k < kV; ++k) {
      const uint32_t words[4] = {xv[k].x, xv[k].y, xv[k].z, xv[k].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float lo = low_of(words[j]), hi = high_of(words[j]);
        acc[k % kA] = fmaf(lo, lo, acc[k % kA]);
        acc[k % kA] = fmaf(hi, hi, acc[k % kA]);
      }
    }
#pragma unroll
    for (int a = 0; a < kA; ++a) acc[a] = warp_sum(acc[a]);
    float sum_sq;
    if constexpr (kG == 1) {
      sum_sq = tree_value<kA, 0, 5, 0>(acc);
    } else {
      // This warp's subtree holds v1's warps member, member + kG, ...: lane `member` after
      // 5 - log2(kG) levels (the same structure for every member, as kG divides v1's warp count).
      exchange_sum[group][member] = tree_value<kG * kA, 0, 5 - kLogG, kLogG>(acc);
      group_barrier<kG>(group);
      sum_sq = top_of_tree<kG>(exchange_sum[group]);
    }
    const float inv = rsqrtf(fmaf(sum_sq, p.inv_hidden, p.eps));  // v1's expression (contracted there)

    // y = bf16(bf16(x * inv) * w) in place, the weight from shared memory; as v1.
    uint32_t amax2 = 0;
#pragma unroll
    for (int k = 0; k < kV; ++k) {
      const uint4 wv = w_shared[first + k * kGroupThreads];
      uint32_t words[4] = {xv[k].x, xv[k].y, xv[k].z, xv[k].w};
      const uint32_t weights[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t normed = to_bf16x2(low_of_prmt(words[j]) * inv, high_of_prmt(words[j]) * inv);
        words[j] = mul_bf16x2(normed, weights[j]);
        amax2 = max_bf16x2(amax2, words[j] & 0x7fff7fffu);
      }
      xv[k] = make_uint4(words[0], words[1], words[2], words[3]);
    }
    float amax = warp_max(fmaxf(low_of(amax2), high_of(amax2)));
    if constexpr (kG > 1) {
      exchange_max[group][member] = amax;
      group_barrier<kG>(group);
#pragma unroll
      for (int h = 0; h < kG; ++h) amax = fmaxf(amax, exchange_max[group][h]);
    }

    const float floored = fmaxf(amax, kAmaxFloor);
    if (first == 0) p.scales[row * p.s_row] = scale_for(floored);  // correctly rounded, as v1's
    const float multiplier = multiplier_without_call(floored);

    // Quantize and store vector k, then load vector k of the next row into its registers.
    const int64_t next = row + row_step;
    const uint4* x_next = row_x(next < rows ? next : row);
    uint2* q = reinterpret_cast<uint2*>(p.q + row * p.q_row) + first;
#pragma unroll
    for (int k = 0; k < kV; ++k) {
      if (exists(k)) {
        const uint32_t words[4] = {xv[k].x, xv[k].y, xv[k].z, xv[k].w};
        uint32_t packed[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          packed[j] = to_e4m3x2(quotient(low_of(words[j]), multiplier), quotient(high_of(words[j]), multiplier));
        }
        q[k * kGroupThreads] = make_uint2(packed[0] | (packed[1] << 16), packed[2] | (packed[3] << 16));
      }
      xv[k] = make_uint4(0, 0, 0, 0);
      if (exists(k) && next < rows) xv[k] = load_readonly(x_next + k * kGroupThreads);
    }
  }
}

// Any layout (a last dimension that is not contiguous, a width that is not a multiple of 8, misaligned
// rows, rows wider than the vector path holds): one CTA per row. The first kStridedHeld elements of each
// thread are loaded once, x and w together, and kept in registers, so a row of up to kStridedHeld * 256
// elements costs one round trip to memory before the first reduction and none after (v1 read w only
// after the sum of squares: a second round trip, 7.1 us for 5 rows of 1001); elements past them are
// read again in each sweep (L1 or L2) and y recomputed.
constexpr int kStridedHeld = 4;

__global__ void __launch_bounds__(kStridedThreads) rmsnorm_quant_strided(Params p) {
  __shared__ float partial_sum[32], partial_max[32];
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* x = p.x + row * p.x_row;
  const int held_end = kStridedHeld * kStridedThreads;

  float xv[kStridedHeld], wv[kStridedHeld];
#pragma unroll
  for (int j = 0; j < kStridedHeld; ++j) {
    const int i = threadIdx.x + j * kStridedThreads;
    xv[j] = i < p.hidden ? __bfloat162float(x[i * p.x_col]) : 0.0f;
    wv[j] = i < p.hidden ? __bfloat162float(p.w[i * p.w_col]) : 0.0f;
  }
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kStridedHeld; ++j) sum_sq = fmaf(xv[j], xv[j], sum_sq);
  for (int i = held_end + threadIdx.x; i < p.hidden; i += kStridedThreads) {
    const float v = __bfloat162float(x[i * p.x_col]);
    sum_sq = fmaf(v, v, sum_sq);
  }
  sum_sq = block_sum(sum_sq, partial_sum);
  const float inv = rsqrtf(sum_sq * p.inv_hidden + p.eps);

  auto y_of = [&](float xval, float wval) {
    const float normed = __bfloat162float(__float2bfloat16_rn(xval * inv));
    return __bfloat162float(__float2bfloat16_rn(normed * wval));
  };
  auto y_at = [&](int i) {
    return y_of(__bfloat162float(x[i * p.x_col]), __bfloat162float(p.w[i * p.w_col]));
  };
  float yv[kStridedHeld];
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < kStridedHeld; ++j) {
    yv[j] = y_of(xv[j], wv[j]);  // 0 past the row's end
    amax = fmaxf(amax, fabsf(yv[j]));
  }
  for (int i = held_end + threadIdx.x; i < p.hidden; i += kStridedThreads) amax = fmaxf(amax, fabsf(y_at(i)));
  amax = block_max(amax, partial_max);

  const float floored = fmaxf(amax, kAmaxFloor);
  if (threadIdx.x == 0) p.scales[row * p.s_row] = floored / kFp8Max;
  const float multiplier = multiplier_for(floored);
  uint8_t* q = p.q + row * p.q_row;
  auto store = [&](int i, float y) {
    q[i * p.q_col] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(quotient(y, multiplier), __NV_SATFINITE, __NV_E4M3));
  };
#pragma unroll
  for (int j = 0; j < kStridedHeld; ++j) {
    const int i = threadIdx.x + j * kStridedThreads;
    if (i < p.hidden) store(i, yv[j]);
  }
  for (int i = held_end + threadIdx.x; i < p.hidden; i += kStridedThreads) store(i, y_at(i));
}

const d2k_tensor* find(const d2k_tensor* list, int32_t n, const char* name) {
  for (int32_t i = 0; i < n; ++i)
    if (std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

template <typename... Args>
int fail(const d2k_call* call, const char* format, Args... args) {
  const int n = std::snprintf(call->error, D2K_ERROR_CAPACITY, "rmsnorm_fp8_quant (cuda): ");
  std::snprintf(call->error + n, D2K_ERROR_CAPACITY - n, format, args...);
  return 1;
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <int kVecs>
void launch_vec(const Params& p, unsigned rows, cudaStream_t stream) {
  const int threads = ((p.vecs + kVecs - 1) / kVecs + 31) / 32 * 32;
  rmsnorm_quant_vec<kVecs><<<rows, threads, 0, stream>>>(p);
}

// The row-group kernel's resident CTAs per SM, asked once per process (the worker runs one device).
template <int kG, int kA, bool kFull>
cudaError_t resident_ctas(int* ctas) {
  static int count = 0;
  static const cudaError_t status = [] {
    int device = 0, sms = 0, per_sm = 0;
    cudaError_t error = cudaGetDevice(&device);
    if (error == cudaSuccess) error = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (error == cudaSuccess) {
      error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, rmsnorm_quant_rows<kG, kA, kFull>, kRowThreads, 0);
    }
    count = sms * per_sm;
    return error;
  }();
  *ctas = count;
  return status;
}

// A persistent grid: at most the resident CTAs, and no more CTAs than an even share of the rows needs.
// Each group walks rows with the grid's stride, so every group does ceil(T / groups) or one fewer rows;
// the grid is sized so that the count of rows per group is as even as the residency allows.
template <int kG, int kA, bool kFull>
cudaError_t launch_rows_as(const Params& p, int64_t rows, cudaStream_t stream) {
  int resident = 0;
  const cudaError_t status = resident_ctas<kG, kA, kFull>(&resident);
  if (status != cudaSuccess) return status;
  if (resident < 1) return cudaErrorInvalidConfiguration;
  constexpr int kGroups = kRowWarps / kG;
  const int64_t max_groups = static_cast<int64_t>(resident) * kGroups;
  const int64_t rows_per_group = (rows + max_groups - 1) / max_groups;
  const int64_t groups = (rows + rows_per_group - 1) / rows_per_group;
  const auto ctas = static_cast<unsigned>((groups + kGroups - 1) / kGroups);
  rmsnorm_quant_rows<kG, kA, kFull><<<ctas, kRowThreads, 0, stream>>>(p, rows);
  return cudaSuccess;
}

template <int kG, int kA>
cudaError_t launch_rows(const Params& p, int64_t rows, cudaStream_t stream) {
  return p.vecs == 4 * kA * 32 * kG ? launch_rows_as<kG, kA, true>(p, rows, stream)
                                    : launch_rows_as<kG, kA, false>(p, rows, stream);
}

// The row-group kernel's shape from v1's warps per row on the 4-vector path, W1 = ceil(vecs / 128):
// kG warps per row with kA = W1 / kG accumulators (and 4 * kA vectors) a thread, kG dividing W1 so that
// the sum of squares can follow v1's order. Any other count (5, 7, more than 8: widths the workloads do
// not have) stays on v1's kernel.
cudaError_t launch_row_groups(const Params& p, int64_t rows, cudaStream_t stream, bool* launched) {
  *launched = true;
  switch ((p.vecs + 127) / 128) {
    case 1: return launch_rows<1, 1>(p, rows, stream);
    case 2: return launch_rows<1, 2>(p, rows, stream);
    case 3: return launch_rows<1, 3>(p, rows, stream);
    case 4: return launch_rows<2, 2>(p, rows, stream);
    case 6: return launch_rows<2, 3>(p, rows, stream);
    case 8: return launch_rows<4, 2>(p, rows, stream);
    default: *launched = false; return cudaSuccess;
  }
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* x = find(call->inputs, call->num_inputs, "x");
  const d2k_tensor* w = find(call->inputs, call->num_inputs, "weight");
  const d2k_tensor* q = find(call->outputs, call->num_outputs, "q");
  const d2k_tensor* s = find(call->outputs, call->num_outputs, "scales");
  if (!x || !w || !q || !s) return fail(call, "expected inputs x, weight and outputs q, scales");
  if (call->num_scalars < 1 || std::strcmp(call->scalars[0].name, "eps") != 0) return fail(call, "expected scalar eps");
  if (x->dtype != D2K_BFLOAT16 || w->dtype != D2K_BFLOAT16 || q->dtype != D2K_FLOAT8_E4M3 || s->dtype != D2K_FLOAT32) {
    return fail(call, "expected x, weight bf16, q f8e4m3, scales f32 (got %d, %d, %d, %d)", x->dtype, w->dtype,
                q->dtype, s->dtype);
  }
  if (x->rank != 2 || w->rank != 1 || q->rank != 2 || s->rank != 2) {
    return fail(call, "expected x, q, scales of rank 2 and weight of rank 1");
  }
  const int64_t T = x->shape[0], H = x->shape[1];
  if (w->shape[0] != H || q->shape[0] != T || q->shape[1] != H || s->shape[0] != T || s->shape[1] != 1) {
    return fail(call, "expected weight [H], q [T, H] and scales [T, 1] for x [%lld, %lld]", (long long)T, (long long)H);
  }
  if (T == 0) return 0;
  if (T > INT32_MAX || H > INT32_MAX) return fail(call, "more than 2^31 - 1 rows or columns");

  Params p;
  p.x = static_cast<const __nv_bfloat16*>(x->data);
  p.w = static_cast<const __nv_bfloat16*>(w->data);
  p.q = static_cast<uint8_t*>(q->data);
  p.scales = static_cast<float*>(s->data);
  p.x_row = x->strides[0];
  p.x_col = x->strides[1];
  p.w_col = w->strides[0];
  p.q_row = q->strides[0];
  p.q_col = q->strides[1];
  p.s_row = s->strides[0];
  p.hidden = static_cast<int>(H);
  p.vecs = static_cast<int>(H / kVecElems);
  p.inv_hidden = static_cast<float>(1.0 / static_cast<double>(H));
  p.eps = static_cast<float>(call->scalars[0].f);

  // The vector path: whole 16-byte vectors of x and the weight, 8-byte runs of q, on aligned rows.
  const bool vector_layout = H % kVecElems == 0 && p.x_col == 1 && p.w_col == 1 && p.q_col == 1 &&
                             (T == 1 || (p.x_row % kVecElems == 0 && p.q_row % kVecElems == 0)) &&
                             aligned(p.x, 16) && aligned(p.w, 16) && aligned(p.q, 8);
  auto stream = static_cast<cudaStream_t>(call->stream);
  const auto rows = static_cast<unsigned>(T);
  // Few rows (under two per SM): one vector per thread, the row spread over the most threads, for
  // latency. Many rows: four vectors (32 elements) per thread, so the two reductions, the scale and
  // the addressing are spread over more elements (the kernel must stay far from issue bound: about 20
  // instructions per element at the copy rate), and 8 KB rows of Llama-3-8B still give 8 resident
  // rows (64 KB of loads in flight) per SM.
  // v2: from 1024 rows (about 8 per SM, where v1 needs more than one wave of CTAs) the row-group
  // kernel: several rows per CTA with no CTA barrier per row, a persistent grid, the next row loaded
  // during the quantization of the current one. Below that v1's CTA per row stays: one wave, and a
  // row's work spread over the most threads (T333: 5.6 us against a 6 us bar).
  const bool few_rows = T < 264;
  bool launched = false;
  if (vector_layout && T >= kRowGroupMinRows) {
    const cudaError_t status = launch_row_groups(p, T, stream, &launched);
    if (status != cudaSuccess) return fail(call, "row-group kernel: %s", cudaGetErrorString(status));
  }
  if (launched) {
  } else if (vector_layout && few_rows && p.vecs <= kMaxThreads) {
    launch_vec<1>(p, rows, stream);
  } else if (vector_layout && p.vecs <= 4 * kMaxThreads) {
    launch_vec<4>(p, rows, stream);
  } else {
    rmsnorm_quant_strided<<<rows, kStridedThreads, 0, stream>>>(p);
  }
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return fail(call, "kernel launch failed: %s", cudaGetErrorString(status));
  return 0;
}
