// Expert CUDA solution of loss/cross_entropy for the H200 (sm_90a), version 2.
//
// Memory-bound: the floor is one read of the counted rows' logits and one write of every row's gradient.
// Persistent clusters: a row is split over the C CTAs of a cluster (C of 1, 2, 4 or 8, the fewest that
// fit), two CTAs per SM, and each cluster walks the rows cid, cid + G, cid + 2G, ... (G clusters, as many
// as fit on the device at once). Each CTA keeps a ring of S slices (S of 1 to 4) in shared memory, filled
// by cp.async 16 bytes at a time, S rows ahead: while it reduces one row and writes its gradient, the
// next S rows stream in, so DRAM never waits for a CTA's serial phases (reduction, cluster barrier) and no
// CTA is launched per row. A thread copies the slice's vectors it will itself use, so the ring needs no
// barrier: the thread's own cp.async.wait_group is the only synchronization on the data.
//
// Per row, each thread moves its vectors from the ring into registers, takes its max (max.bf16x2, exact)
// and its sum of 2^((x - max) log2 e), and hands the ring slot back at once (the copy of row k + S is
// issued into it). The (max, sum) pairs merge by shuffles, across the CTA's warps, then across the
// cluster: each CTA pushes its pair into slot `rank` of every peer's shared memory (double-buffered by the
// parity of the row, so a fast CTA's next push never meets a slow peer's merge), one cluster barrier, and
// every CTA merges the slots in rank order (deterministic). The gradient, 2^((x - max) log2 e - log2 S)
// times 1 / count, is computed from the registers, rounded in pairs and stored over the vectors it came
// from: DRAM sees one read and one write. An ignored row stores zeros without reading (no copy is issued).
//
// The mean's denominator: every CTA counts the targets itself (N int64 from L2) while its first rows are
// in flight: one launch, no dependency between kernels. The arithmetic and its rounding points are those
// of version 1.
//
// Rows need not be 16-byte aligned (V may be odd): a row is covered by the aligned 16-byte vectors that
// overlap it. The at most two partial vectors at its ends are copied whole where the 16 bytes lie inside
// the logits tensor (the elements outside the row, a neighbour's or padding, are read and replaced by -inf
// in registers, never written), element by element otherwise (the tensor's first and last bytes); they are
// stored element by element, never outside the row. A vocabulary too wide for eight CTAs' shared memory
// (over about 262 000) takes a plain two-pass kernel.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxCluster = 8;  // the portable cluster size
constexpr int kMaxStages = 4;
constexpr int kMaxVectorsPerThread = 16;
// Dynamic shared memory per CTA at two CTAs per SM: 228 KB per SM, 1 KB reserved per CTA, about 240 bytes
// of static shared memory.
constexpr int kSmemBudget = 112 * 1024;
constexpr int64_t kIgnoreIndex = -100;
constexpr float kLog2e = 1.4426950408889634f;
constexpr uint16_t kNegInfBf16 = 0xff80;
constexpr uint32_t kNegInf2 = kNegInfBf16 | (uint32_t{kNegInfBf16} << 16);

struct Args {
  uint16_t* logits;  // bf16 bits, [N, V], row stride `stride`, elements contiguous
  const int64_t* targets;
  float* loss;
  const unsigned* count;  // written by count_kernel (the two-pass path only)
  int64_t rows, vocab, stride, target_stride, loss_stride;
  // The persistent kernel: the logits tensor's extent [begin, end) (a 16-byte vector inside it may be read
  // whole), the vectors of a CTA's slice of a row, and the ring's slots.
  const uint16_t* extent_begin;
  const uint16_t* extent_end;
  int slice, stages;
};

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The larger of each half of two bf16x2 values.
__device__ __forceinline__ uint32_t hmax2(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

__device__ __forceinline__ float lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// Round to nearest even, two values in one instruction (low half: a).
__device__ __forceinline__ uint32_t pack(float a, float b) {
  uint32_t bits;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(bits) : "f"(b), "f"(a));
  return bits;
}

__device__ __forceinline__ uint16_t round_one(float a) { return static_cast<uint16_t>(pack(a, 0.0f)); }

// (max, sum of exp(x - max)) pairs, merged. A pair of max -inf holds nothing (its sum is 0).
struct Partial {
  float max, sum;
};

__device__ __forceinline__ Partial merge(Partial a, Partial b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return {m, 0.0f};
  return {m, a.sum * exp2_approx((a.max - m) * kLog2e) + b.sum * exp2_approx((b.max - m) * kLog2e)};
}

__device__ __forceinline__ Partial warp_merge(Partial p) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Partial other = {__shfl_xor_sync(0xffffffffu, p.max, offset), __shfl_xor_sync(0xffffffffu, p.sum, offset)};
    p = merge(p, other);
  }
  return p;
}

// The number of counted rows, into *count: one CTA. It lets the dependent main kernel start right away.
__global__ void __launch_bounds__(1024) count_kernel(const int64_t* targets, int64_t rows, int64_t stride,
                                                     unsigned* count) {
  asm volatile("griddepcontrol.launch_dependents;");
  __shared__ unsigned warp_counts[32];
  unsigned mine = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) mine += targets[i * stride] != kIgnoreIndex;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) mine += __shfl_xor_sync(0xffffffffu, mine, offset);
  if ((threadIdx.x & 31) == 0) warp_counts[threadIdx.x >> 5] = mine;
  __syncthreads();
  if (threadIdx.x < 32) {
    unsigned total = threadIdx.x < (blockDim.x >> 5) ? warp_counts[threadIdx.x] : 0;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) total += __shfl_xor_sync(0xffffffffu, total, offset);
    if (threadIdx.x == 0) *count = total;
  }
}

// The 8 elements at row[start, start + 8) as one vector, the ones outside [0, vocab) read as -inf: the at
// most two vectors at a row's ends that are not wholly inside it. Never inlined: it is cold code.
__device__ __noinline__ uint4 load_partial(const uint16_t* row, int start, int vocab) {
  uint32_t w[4];
  for (int q = 0; q < 4; ++q) {
    const int a = start + 2 * q, b = a + 1;
    const uint32_t x = a >= 0 && a < vocab ? row[a] : kNegInfBf16;
    const uint32_t y = b >= 0 && b < vocab ? row[b] : kNegInfBf16;
    w[q] = x | (y << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __noinline__ void store_partial(uint16_t* row, int start, int vocab, uint4 bits) {
  const uint32_t w[4] = {bits.x, bits.y, bits.z, bits.w};
  for (int e = 0; e < 8; ++e)
    if (start + e >= 0 && start + e < vocab) row[start + e] = static_cast<uint16_t>(w[e / 2] >> (16 * (e % 2)));
}

// The vector with its elements outside the row (start + e outside [0, vocab)) replaced by -inf: the two
// partial vectors at a row's ends. Inline selects (a call here would make the caller save the row's
// registers).
__device__ __forceinline__ uint4 mask_outside(uint4 v, int start, int vocab) {
  uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int shift = 16 * (e % 2);
    const uint32_t masked = (w[e / 2] & ~(0xffffu << shift)) | (uint32_t{kNegInfBf16} << shift);
    w[e / 2] = static_cast<unsigned>(start + e) < static_cast<unsigned>(vocab) ? w[e / 2] : masked;
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// A partial vector whose 16 bytes are not all inside the tensor, element by element into the ring. Cold.
__device__ __noinline__ void copy_partial(const uint16_t* row, int start, int vocab, uint4* slot) {
  *slot = load_partial(row, start, vocab);
}

__device__ __forceinline__ void copy16(uint4* slot, const uint16_t* src) {
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(slot));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to), "l"(src) : "memory");
}

// A 16-byte store to a 16-byte aligned address (said in PTX: the compiler cannot prove the alignment of a
// row's vectors and would split the store in four).
__device__ __forceinline__ void store16(uint16_t* to, uint4 bits) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(to), "r"(bits.x), "r"(bits.y), "r"(bits.z), "r"(bits.w)
               : "memory");
}

__device__ __forceinline__ void commit_row() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Until at most `pending` of this thread's committed copies (one group per row) are still in flight.
__device__ __forceinline__ void wait_rows(int pending) {
  switch (pending) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
  }
}

__device__ __forceinline__ int64_t target_of(const Args& a, int64_t row) {
  return row < a.rows ? a.targets[row * a.target_stride] : kIgnoreIndex;
}

// Where a row's vectors are: the row's first element sits `head` elements past a 16-byte boundary, so the
// row overlaps `covered` aligned vectors; vector g holds elements [8 g - head, 8 g - head + 8).
struct RowView {
  uint16_t* ptr;
  int head, covered;
};

__device__ __forceinline__ RowView view_of(const Args& a, int64_t row) {
  RowView r;
  r.ptr = a.logits + row * a.stride;
  r.head = static_cast<int>((reinterpret_cast<uintptr_t>(r.ptr) & 15) >> 1);
  r.covered = (r.head + static_cast<int>(a.vocab) + 7) >> 3;
  return r;
}

// This thread's copies of the CTA's slice of `row` (vectors first + local, local = tid + i * kThreads) into
// the ring slot; the caller commits them as one group.
template <int IMAX>
__device__ __forceinline__ void issue_row(const Args& a, int64_t row, uint4* slot, int first) {
  const RowView r = view_of(a, row);
  const int vocab = static_cast<int>(a.vocab);
  const int limit = min(a.slice, r.covered - first);
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    const int local = static_cast<int>(threadIdx.x) + i * kThreads;
    if (local >= limit) continue;
    const int start = 8 * (first + local) - r.head;
    const uint16_t* src = r.ptr + start;  // 16-byte aligned
    if ((start >= 0 && start <= vocab - 8) || (src >= a.extent_begin && src + 8 <= a.extent_end)) {
      copy16(slot + local, src);
    } else {
      copy_partial(r.ptr, start, vocab, slot + local);
    }
  }
}

// Persistent: cluster cid of G (gridDim.x / C) takes rows cid, cid + G, ...; the CTA of rank r holds
// vectors [r K, r K + K) of each (K = slice), at most IMAX per thread. Two CTAs per SM.
template <int IMAX>
__global__ void __launch_bounds__(kThreads, 2) cross_entropy_persistent(Args a) {
  extern __shared__ uint4 ring[];  // [stages][slice]
  __shared__ Partial warp_partials[kWarps];
  __shared__ Partial cluster_partials[2][kMaxCluster];
  __shared__ float row_max, row_log_sum, row_bias;
  __shared__ unsigned warp_counts[kWarps];

  const cg::cluster_group cluster = cg::this_cluster();
  const int cluster_size = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t cid = blockIdx.x / cluster_size;
  const int64_t clusters = gridDim.x / cluster_size;
  const int tid = static_cast<int>(threadIdx.x);
  const int vocab = static_cast<int>(a.vocab);
  const int stages = a.stages, slice = a.slice;
  const int first = rank * slice;

  // The first `stages` rows' copies, one group each (empty for an ignored row or past the last row); their
  // targets read first, all at once.
  int64_t early[kMaxStages];
#pragma unroll
  for (int s = 0; s < kMaxStages; ++s) early[s] = s < stages ? target_of(a, cid + s * clusters) : kIgnoreIndex;
#pragma unroll
  for (int s = 0; s < kMaxStages; ++s) {
    if (s >= stages) break;
    if (early[s] != kIgnoreIndex) issue_row<IMAX>(a, cid + s * clusters, ring + s * slice, first);
    commit_row();
  }
  // The target of the row whose copy the first iteration issues.
  int64_t far_target = target_of(a, cid + stages * clusters);

  // The count of the rows not ignored, while those copies fly: every thread ends with the same sum, taken
  // in the same order.
  unsigned mine = 0;
#pragma unroll 8
  for (int64_t i = tid; i < a.rows; i += kThreads) mine += a.targets[i * a.target_stride] != kIgnoreIndex;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) mine += __shfl_xor_sync(0xffffffffu, mine, offset);
  if ((tid & 31) == 0) warp_counts[tid >> 5] = mine;
  __syncthreads();
  unsigned count = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) count += warp_counts[w];
  const float unit = 1.0f / static_cast<float>(count);  // used only when a row is counted: count >= 1

  int64_t target = early[0];
  int slot = 0, phase = 0;
  for (int64_t row = cid; row < a.rows; row += clusters) {
    // The next iteration's targets, loaded now and used then.
    const int64_t next_target = target_of(a, row + clusters);
    const int64_t next_far_target = target_of(a, row + (stages + 1) * clusters);
    const RowView r = view_of(a, row);
    const int limit = min(slice, r.covered - first);  // this CTA's vectors of the row
    const int origin = 8 * first - r.head;            // the element where the slice begins
    const bool counted = target != kIgnoreIndex;

    // Pass one, from the ring into registers: the thread's max, then its sum of exp(x - max).
    uint4 v[IMAX];
    float m = -INFINITY, s = 0.0f;
    if (counted) {
      wait_rows(stages - 1);  // this row's group (the oldest of the `stages` in flight) has landed
      const uint4* from = ring + slot * slice;
#pragma unroll
      for (int i = 0; i < IMAX; ++i) {
        const int local = tid + i * kThreads;
        if (local < limit) {
          v[i] = from[local];
          const int at = origin + 8 * local;
          if (at < 0 || at > vocab - 8) v[i] = mask_outside(v[i], at, vocab);
        } else {
          v[i] = make_uint4(kNegInf2, kNegInf2, kNegInf2, kNegInf2);
        }
      }
      uint32_t m2 = kNegInf2;
#pragma unroll
      for (int i = 0; i < IMAX; ++i) m2 = hmax2(hmax2(m2, hmax2(v[i].x, v[i].y)), hmax2(v[i].z, v[i].w));
      m = fmaxf(lo(m2), hi(m2));
      const float base = m == -INFINITY ? 0.0f : m;  // a thread with nothing: exp(-inf - 0) = 0
#pragma unroll
      for (int i = 0; i < IMAX; ++i) {
        if (tid + i * kThreads >= limit) continue;
        const uint32_t w[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
        for (int q = 0; q < 4; ++q)
          s += exp2_approx((lo(w[q]) - base) * kLog2e) + exp2_approx((hi(w[q]) - base) * kLog2e);
      }
    }

    // The slot is free (its vectors are in registers and used): row + stages * G's copies go into it.
    const int64_t far_row = row + stages * clusters;
    if (far_row < a.rows && far_target != kIgnoreIndex) issue_row<IMAX>(a, far_row, ring + slot * slice, first);
    commit_row();

    if (!counted) {
      // Zeros without a read; the whole cluster takes this branch (one row), so no barrier is missed.
#pragma unroll
      for (int i = 0; i < IMAX; ++i) {
        const int local = tid + i * kThreads;
        if (local >= limit) continue;
        const int at = origin + 8 * local;
        if (at >= 0 && at <= vocab - 8) {
          store16(r.ptr + at, make_uint4(0, 0, 0, 0));
        } else {
          store_partial(r.ptr, at, vocab, make_uint4(0, 0, 0, 0));
        }
      }
      if (rank == 0 && tid == 0) a.loss[row * a.loss_stride] = 0.0f;
    } else {
      // CTA, then cluster. The slots of this row are cluster_partials[phase]: a peer pushes the next
      // counted row's pairs into the other half, and the one after that only once this CTA has passed
      // the next barrier, after its merge of this row.
      Partial p = warp_merge({m, s});
      if ((tid & 31) == 0) warp_partials[tid >> 5] = p;
      __syncthreads();
      if (tid < 32) {
        p = warp_merge(tid < kWarps ? warp_partials[tid] : Partial{-INFINITY, 0.0f});
        // Lane 0's pair to every peer: the butterfly leaves the lanes' sums a rounding apart (merge's
        // first product is fused into its add, so merge(a, b) and merge(b, a) can differ in the last
        // bit), and every CTA of the cluster must merge the same pairs.
        p = {__shfl_sync(0xffffffffu, p.max, 0), __shfl_sync(0xffffffffu, p.sum, 0)};
        if (tid < cluster_size) *cluster.map_shared_rank(&cluster_partials[phase][rank], tid) = p;
      }
      cluster.sync();
      if (tid == 0) {
        Partial total = cluster_partials[phase][0];
        for (int c = 1; c < cluster_size; ++c) total = merge(total, cluster_partials[phase][c]);
        row_max = total.max;
        row_log_sum = logf(total.sum);
        // gradient = exp(x - max - log S) / count = 2^((x - max) log2 e - log2 S) * (1 / count): log2 S
        // is small (0 <= log2 S <= log2 V), so the exponent keeps the bits a confident target's
        // probability minus one needs.
        row_bias = log2f(total.sum);
      }
      __syncthreads();
      phase ^= 1;
      const float row_m = row_max, bias = row_bias;
      const int y = static_cast<int>(target);

      // The gradient from the registers, stored over them; the thread holding the target writes the loss
      // from the target's logit and subtracts 1 / count from its element before rounding.
#pragma unroll
      for (int i = 0; i < IMAX; ++i) {
        const int local = tid + i * kThreads;
        if (local >= limit) continue;
        const int at = origin + 8 * local;
        const uint32_t w[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
        float g[8];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          g[2 * q] = exp2_approx(fmaf(lo(w[q]) - row_m, kLog2e, -bias)) * unit;
          g[2 * q + 1] = exp2_approx(fmaf(hi(w[q]) - row_m, kLog2e, -bias)) * unit;
        }
        if (static_cast<unsigned>(y - at) < 8u) {
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            if (at + e != y) continue;
            const float x_target = e % 2 ? hi(w[e / 2]) : lo(w[e / 2]);
            a.loss[row * a.loss_stride] = (row_m - x_target) + row_log_sum;
            g[e] -= unit;
          }
        }
        const uint4 bits = make_uint4(pack(g[0], g[1]), pack(g[2], g[3]), pack(g[4], g[5]), pack(g[6], g[7]));
        if (at >= 0 && at <= vocab - 8) {
          store16(r.ptr + at, bits);
        } else {
          store_partial(r.ptr, at, vocab, bits);
        }
      }
    }

    target = next_target;
    far_target = next_far_target;
    slot = slot + 1 == stages ? 0 : slot + 1;
  }
}

// Any vocabulary: one CTA per row, an online max/sum pass, then a second read (from L2 where it fits).
__global__ void __launch_bounds__(1024) cross_entropy_two_pass(Args args) {
  const int64_t row = blockIdx.x;
  const int64_t target = args.targets[row * args.target_stride];
  uint16_t* row_ptr = args.logits + row * args.stride;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (target == kIgnoreIndex) {
    for (int64_t j = threadIdx.x; j < args.vocab; j += blockDim.x) row_ptr[j] = 0;
    if (threadIdx.x == 0) args.loss[row * args.loss_stride] = 0.0f;
    return;
  }
  Partial p = {-INFINITY, 0.0f};
  for (int64_t j = threadIdx.x; j < args.vocab; j += blockDim.x) {
    const float x = __uint_as_float(static_cast<uint32_t>(row_ptr[j]) << 16);
    p = merge(p, Partial{x, 1.0f});
  }
  __shared__ Partial partials[32];
  __shared__ float x_target;
  p = warp_merge(p);
  if ((threadIdx.x & 31) == 0) partials[threadIdx.x >> 5] = p;
  if (threadIdx.x == 0) x_target = __uint_as_float(static_cast<uint32_t>(row_ptr[target]) << 16);
  __syncthreads();
  if (threadIdx.x < 32) {
    p = warp_merge(threadIdx.x < (blockDim.x >> 5) ? partials[threadIdx.x] : Partial{-INFINITY, 0.0f});
    if (threadIdx.x == 0) partials[0] = p;
  }
  __syncthreads();
  const Partial total = partials[0];
  const unsigned count = *args.count;
  const float bias = log2f(total.sum);
  const float unit = 1.0f / static_cast<float>(count);
  if (threadIdx.x == 0) args.loss[row * args.loss_stride] = (total.max - x_target) + logf(total.sum);
  for (int64_t j = threadIdx.x; j < args.vocab; j += blockDim.x) {
    const float x = __uint_as_float(static_cast<uint32_t>(row_ptr[j]) << 16);
    float g = exp2_approx(fmaf(x - total.max, kLog2e, -bias)) * unit;
    if (j == target) g -= unit;
    row_ptr[j] = round_one(g);
  }
}

int failed(const d2k_call* call, const char* message) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "cross_entropy (cuda): %s", message);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

// Launches the two-pass kernel as the count kernel's programmatic dependent.
cudaError_t launch_two_pass(const Args& args, cudaStream_t stream) {
  count_kernel<<<1, 1024, 0, stream>>>(args.targets, args.rows, args.target_stride, const_cast<unsigned*>(args.count));
  cudaLaunchAttribute attribute;
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(args.rows));
  config.blockDim = dim3(1024);
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, cross_entropy_two_pass, args);
}

// The persistent kernel's shape for a vocabulary: the fewest CTAs per cluster (1, 2, 4, 8) whose slice of
// the widest row (one that starts 2 bytes past a 16-byte boundary) is at most 16 vectors per thread and
// leaves room for at least two slots of the ring (then: one slot); the slots, up to four, that fit.
struct Plan {
  int vectors_per_thread, cluster, slice, stages;  // vectors_per_thread 0: the two-pass kernel
};

int bucket(int64_t vectors) {
  for (int b : {1, 2, 4, 8, 10, kMaxVectorsPerThread})
    if (vectors <= b) return b;
  return 0;
}

Plan plan_for(int64_t vocab) {
  const int64_t covered = (vocab + 7 + 7) / 8;
  for (int min_stages : {2, 1}) {
    for (int cluster : {1, 2, 4, 8}) {
      const int64_t slice = (covered + cluster - 1) / cluster;
      const int per_thread = bucket((slice + kThreads - 1) / kThreads);
      if (per_thread == 0) continue;
      const int64_t stages = std::min<int64_t>(kMaxStages, kSmemBudget / (16 * slice));
      if (stages >= min_stages)
        return {per_thread, cluster, static_cast<int>(slice), static_cast<int>(stages)};
    }
  }
  return {0, 0, 0, 0};
}

// How many clusters of the kernel fit on the device at once (cached per device, kernel, cluster size and
// shared memory); 0 when none does.
cudaError_t resident_clusters(const void* kernel, cudaLaunchConfig_t config, int* clusters) {
  struct Entry {
    int device;
    const void* kernel;
    unsigned cluster;
    size_t smem;
    int clusters;
  };
  static Entry cache[32];
  static int used = 0;
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  const unsigned cluster = config.numAttrs > 0 ? config.attrs[0].val.clusterDim.x : 1;
  for (int i = 0; i < used; ++i) {
    const Entry& e = cache[i];
    if (e.device == device && e.kernel == kernel && e.cluster == cluster && e.smem == config.dynamicSmemBytes) {
      *clusters = e.clusters;
      return cudaSuccess;
    }
  }
  if (cluster > 1) {
    error = cudaOccupancyMaxActiveClusters(clusters, kernel, &config);
  } else {
    int per_sm = 0, sms = 0;
    error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, config.dynamicSmemBytes);
    if (error == cudaSuccess) error = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    *clusters = per_sm * sms;
  }
  if (error != cudaSuccess) return error;
  if (used < 32) cache[used++] = {device, kernel, cluster, config.dynamicSmemBytes, *clusters};
  return cudaSuccess;
}

template <int IMAX>
cudaError_t launch_persistent(Args args, const Plan& plan, cudaStream_t stream, bool* launched) {
  const void* kernel = reinterpret_cast<const void*>(cross_entropy_persistent<IMAX>);
  static bool configured[64] = {};
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  if (device < 0 || device >= 64 || !configured[device]) {
    error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBudget);
    if (error == cudaSuccess)
      error = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
    if (error != cudaSuccess) return error;
    if (device >= 0 && device < 64) configured[device] = true;
  }
  args.slice = plan.slice;
  args.stages = plan.stages;
  cudaLaunchAttribute attribute;
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(plan.cluster);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(plan.cluster));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = static_cast<size_t>(plan.slice) * plan.stages * sizeof(uint4);
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = plan.cluster > 1 ? 1 : 0;
  int clusters = 0;
  error = resident_clusters(kernel, config, &clusters);
  if (error != cudaSuccess || clusters <= 0) return error;  // none fits: *launched stays false
  config.gridDim = dim3(static_cast<unsigned>(std::min<int64_t>(clusters, args.rows) * plan.cluster));
  *launched = true;
  return cudaLaunchKernelEx(&config, cross_entropy_persistent<IMAX>, args);
}

}  // namespace

extern "C" int d2k_workspace_size(const d2k_call*, size_t* bytes) {
  *bytes = 256;
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* logits = find(call->outputs, call->num_outputs, "logits");
  const d2k_tensor* targets = find(call->inputs, call->num_inputs, "targets");
  const d2k_tensor* loss = find(call->outputs, call->num_outputs, "loss");
  if (!logits || !targets || !loss) return failed(call, "missing the output 'logits' or 'loss', or the input 'targets'");
  if (logits->dtype != D2K_BFLOAT16 || logits->rank != 2 || targets->dtype != D2K_INT64 || targets->rank != 1 ||
      loss->dtype != D2K_FLOAT32 || loss->rank != 1)
    return failed(call, "expects logits [N, V] bf16, targets [N] int64 and loss [N] fp32");
  if (logits->strides[1] != 1) return failed(call, "the logits' elements must be contiguous (stride 1)");
  if (!call->workspace || call->workspace_bytes < sizeof(unsigned)) return failed(call, "no workspace for the count");

  Args args = {};
  args.logits = static_cast<uint16_t*>(logits->data);
  args.targets = static_cast<const int64_t*>(targets->data);
  args.loss = static_cast<float*>(loss->data);
  args.count = static_cast<const unsigned*>(call->workspace);
  args.rows = logits->shape[0];
  args.vocab = logits->shape[1];
  args.stride = logits->strides[0];
  args.target_stride = targets->strides[0];
  args.loss_stride = loss->strides[0];
  if (args.rows == 0) return 0;
  args.extent_begin = args.logits;
  args.extent_end = args.logits + (args.rows - 1) * args.stride + args.vocab;
  const auto stream = static_cast<cudaStream_t>(call->stream);

  const Plan plan = plan_for(args.vocab);
  cudaError_t error = cudaSuccess;
  bool launched = false;
  switch (plan.vectors_per_thread) {
    case 1: error = launch_persistent<1>(args, plan, stream, &launched); break;
    case 2: error = launch_persistent<2>(args, plan, stream, &launched); break;
    case 4: error = launch_persistent<4>(args, plan, stream, &launched); break;
    case 8: error = launch_persistent<8>(args, plan, stream, &launched); break;
    case 10: error = launch_persistent<10>(args, plan, stream, &launched); break;
    case 16: error = launch_persistent<16>(args, plan, stream, &launched); break;
    default: break;
  }
  if (error == cudaSuccess && !launched) error = launch_two_pass(args, stream);
  if (error == cudaSuccess) error = cudaGetLastError();
  if (error != cudaSuccess) return failed(call, cudaGetErrorString(error));
  return 0;
}
