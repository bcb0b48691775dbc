// Candidate v3 of loss/cross_entropy's CUDA solution (H200, sm_90a): v1 (solution/cuda/) plus a persistent,
// prefetching kernel for the row shapes of VPT 8 and 10 (cross_entropy_persistent below). Not the expert:
// notes.md says how it is measured against v1 and what decides.
//
// Memory-bound: the floor is one read of the counted rows' logits and one write of every row's gradient.
// A row is split over a cluster of C CTAs (C <= 8). Each thread loads its VPT 16-byte vectors of the row
// once and keeps them in registers; the thread's (max, sum of exp) pair is reduced over the CTA by
// shuffles, over the cluster through distributed shared memory (each CTA pushes its pair into every
// peer's slot, one cluster barrier), and the gradient is computed from the same registers and stored over
// them: DRAM sees one read and one write. An ignored row stores zeros without reading.
//
// The mean's denominator (the number of counted rows) comes from a tiny first kernel over the targets.
// The main kernel is its programmatic dependent launch: it starts at once, loads and reduces its row, and
// waits for the count (griddepcontrol.wait) only before its first store, so the count costs no pass over
// the logits and almost no time.
//
// Rows need not be 16-byte aligned (V may be odd): a row is covered by the aligned 16-byte vectors that
// overlap it; the at most two partial ones at its ends are read and written element by element, never
// outside the row. A vocabulary wider than 8 x 256 x 12 vectors takes a plain two-pass kernel.
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
constexpr int64_t kIgnoreIndex = -100;
constexpr float kLog2e = 1.4426950408889634f;
constexpr uint16_t kNegInfBf16 = 0xff80;

struct Args {
  uint16_t* logits;  // bf16 bits, [N, V], row stride `stride`, elements contiguous
  const int64_t* targets;
  float* loss;
  const unsigned* count;  // written by count_kernel
  int64_t rows, vocab, stride, target_stride, loss_stride;
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

// The cluster barrier after a pair is pushed into the peers' shared memory: the pushing lanes fence
// their stores (fence.acq_rel.cluster) and every thread arrives relaxed and waits (acquire). cluster.sync()
// arrives with release semantics in every thread, which compiles to a GPU-wide MEMBAR in all 256 (the
// profile's membar stall), where only the lanes that stored need one.
__device__ __forceinline__ void cluster_barrier() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
}

// Three CTAs per SM up to VPT 10 (80 registers, no spill: Llama-3's and Qwen's rows), two at VPT 12.
template <int VPT>
constexpr int kBlocksPerSm = VPT <= 10 ? 3 : 2;

constexpr int kStep = 8 * kThreads;  // elements between a thread's consecutive vectors

// The first element of this thread's first vector of the row at row_ptr, in a CTA of cluster rank `rank`:
// the aligned vectors that overlap the row, the thread's j-th holding elements [start + j kStep, + 8);
// head elements of the first lie before the row.
template <int VPT>
__device__ __forceinline__ int thread_start(const uint16_t* row_ptr, int rank) {
  const int head = static_cast<int>((reinterpret_cast<uintptr_t>(row_ptr) & 15) >> 1);
  return 8 * (rank * kThreads * VPT + static_cast<int>(threadIdx.x)) - head;
}

// An ignored row: zeros over this thread's vectors, nothing read.
template <int VPT>
__device__ __forceinline__ void store_zeros(uint16_t* row_ptr, int start, int vocab) {
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int at = start + j * kStep;
    if (at >= 0 && at <= vocab - 8) {
      *reinterpret_cast<uint4*>(row_ptr + at) = make_uint4(0, 0, 0, 0);
    } else if (at < vocab && at + 8 > 0) {
      store_partial(row_ptr, at, vocab, make_uint4(0, 0, 0, 0));
    }
  }
}

// The thread's max (on the packed pairs: bf16 max is exact), then its sum of exp(x - max): x - max is
// exact in fp32 for bf16 values of like range.
template <int VPT>
__device__ __forceinline__ Partial thread_partial(const uint4 (&v)[VPT]) {
  uint32_t m2 = v[0].x;
#pragma unroll
  for (int j = 0; j < VPT; ++j) m2 = hmax2(hmax2(m2, hmax2(v[j].x, v[j].y)), hmax2(v[j].z, v[j].w));
  const float m = fmaxf(lo(m2), hi(m2));
  const float base = m == -INFINITY ? 0.0f : m;  // a thread with nothing: exp(-inf - 0) = 0
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const uint32_t w[4] = {v[j].x, v[j].y, v[j].z, v[j].w};
#pragma unroll
    for (int q = 0; q < 4; ++q)
      s += exp2_approx((lo(w[q]) - base) * kLog2e) + exp2_approx((hi(w[q]) - base) * kLog2e);
  }
  return {m, s};
}

// What every thread of a row needs after the reduction.
struct RowTotals {
  float max, log_sum, bias, unit;
};

// Thread 0: the cluster's pairs merged in rank order (the same result in every CTA, on every run) and the
// count, which the count kernel wrote (visible after griddepcontrol.wait, which returns at once after the
// first time).
__device__ __forceinline__ RowTotals merge_row(const Partial* slots, int cluster_size, const unsigned* count_ptr) {
  Partial total = slots[0];
  for (int r = 1; r < cluster_size; ++r) total = merge(total, slots[r]);
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const float count = static_cast<float>(*count_ptr);
  // gradient = exp(x - max - log S) / count = 2^((x - max) log2 e - log2 S) * (1 / count). log2 S is
  // small (0 <= log2 S <= log2 V), so the exponent keeps the precision that a confident target's
  // probability minus one needs; folding log2(count) into it would round it at the magnitude of
  // log2 count, eight times coarser.
  return {total.max, logf(total.sum), log2f(total.sum), 1.0f / count};
}

// The gradient from the registers, stored over them. The thread that holds the target writes the loss
// from the target's logit in its registers and subtracts 1 / count from its element before rounding.
template <int VPT>
__device__ __forceinline__ void store_gradient(const uint4 (&v)[VPT], uint16_t* row_ptr, int start, int vocab,
                                               int target, RowTotals r, float* loss) {
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int at = start + j * kStep;
    if (at >= vocab || at + 8 <= 0) continue;
    const uint32_t w[4] = {v[j].x, v[j].y, v[j].z, v[j].w};
    float g[8];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      g[2 * q] = exp2_approx(fmaf(lo(w[q]) - r.max, kLog2e, -r.bias)) * r.unit;
      g[2 * q + 1] = exp2_approx(fmaf(hi(w[q]) - r.max, kLog2e, -r.bias)) * r.unit;
    }
    if (static_cast<unsigned>(target - at) < 8u) {
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        if (at + e != target) continue;
        const float x_target = e % 2 ? hi(w[e / 2]) : lo(w[e / 2]);
        *loss = (r.max - x_target) + r.log_sum;
        g[e] -= r.unit;
      }
    }
    const uint4 bits = make_uint4(pack(g[0], g[1]), pack(g[2], g[3]), pack(g[4], g[5]), pack(g[6], g[7]));
    if (at >= 0 && at <= vocab - 8) {
      *reinterpret_cast<uint4*>(row_ptr + at) = bits;
    } else {
      store_partial(row_ptr, at, vocab, bits);
    }
  }
}

// The vector at `at` of a row whose whole vectors are not read here: the partial end vectors element by
// element, -inf past the row.
__device__ __forceinline__ uint4 edge_vector(const uint16_t* row_ptr, int at, int vocab) {
  if (at < vocab && at + 8 > 0) return load_partial(row_ptr, at, vocab);
  const uint32_t inf2 = kNegInfBf16 | (uint32_t{kNegInfBf16} << 16);
  return make_uint4(inf2, inf2, inf2, inf2);
}

// One row per cluster of C CTAs (C divides the grid); VPT 16-byte vectors per thread, held in registers.
// Indices within a row are 32-bit (V < 2^28).
template <int VPT>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm<VPT>) cross_entropy_kernel(Args args) {
  const cg::cluster_group cluster = cg::this_cluster();
  const int cluster_size = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t row = blockIdx.x / cluster_size;
  const int64_t target64 = args.targets[row * args.target_stride];
  uint16_t* row_ptr = args.logits + row * args.stride;
  const int vocab = static_cast<int>(args.vocab);
  const int start = thread_start<VPT>(row_ptr, rank);

  if (target64 == kIgnoreIndex) {
    // Nothing to read and no count needed; every CTA of the cluster takes this branch, so no cluster
    // barrier is waited for.
    store_zeros<VPT>(row_ptr, start, vocab);
    if (rank == 0 && threadIdx.x == 0) args.loss[row * args.loss_stride] = 0.0f;
    return;
  }

  // The loads: all VPT issued before any is used; a vector wholly past the row holds -inf.
  uint4 v[VPT];
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int at = start + j * kStep;
    v[j] = at >= 0 && at <= vocab - 8 ? *reinterpret_cast<const uint4*>(row_ptr + at) : edge_vector(row_ptr, at, vocab);
  }

  // CTA, then cluster: each CTA pushes its pair into slot `rank` of every peer, one barrier, then every
  // CTA merges the slots in rank order. After the barrier no CTA touches a peer's shared memory, so none
  // waits for the others again.
  __shared__ Partial warp_partials[kWarps];
  __shared__ Partial cluster_partials[kMaxCluster];
  __shared__ RowTotals totals;
  Partial p = warp_merge(thread_partial<VPT>(v));
  if ((threadIdx.x & 31) == 0) warp_partials[threadIdx.x >> 5] = p;
  __syncthreads();
  if (threadIdx.x < 32) {
    p = warp_merge(threadIdx.x < kWarps ? warp_partials[threadIdx.x] : Partial{-INFINITY, 0.0f});
    if (threadIdx.x < cluster_size) {
      *cluster.map_shared_rank(&cluster_partials[rank], threadIdx.x) = p;
      asm volatile("fence.acq_rel.cluster;" ::: "memory");
    }
  }
  cluster_barrier();
  if (threadIdx.x == 0) totals = merge_row(cluster_partials, cluster_size, args.count);
  __syncthreads();
  store_gradient<VPT>(v, row_ptr, start, vocab, static_cast<int>(target64), totals, args.loss + row * args.loss_stride);
}

// ---------------------------------------------------------------------------------------------------
// v3 (candidate): the same row split and registers as cross_entropy_kernel, but persistent clusters that
// each take every G-th row, and the next row's slice copied into shared memory (cp.async, L2 only) while
// the current one is reduced over the cluster and written. Each thread copies, and later reads, only its
// own VPT slots (slot j at slots[j * kThreads + thread]), so no barrier guards them: cp.async.wait_all
// makes a thread's own copies visible to it.

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

// This thread's whole vectors of a row into its slots, one commit group; the partial end vectors are
// read from global memory when used (edge_vector).
template <int VPT>
__device__ __forceinline__ void prefetch_row(const uint16_t* row_ptr, int start, int vocab, uint32_t slots) {
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int at = start + j * kStep;
    if (at >= 0 && at <= vocab - 8) cp_async_16(slots + j * kThreads * 16, row_ptr + at);
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int VPT>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm<VPT>) cross_entropy_persistent(Args args) {
  const cg::cluster_group cluster = cg::this_cluster();
  const int cluster_size = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int rows = static_cast<int>(args.rows), clusters = static_cast<int>(gridDim.x) / cluster_size;
  const int vocab = static_cast<int>(args.vocab);
  extern __shared__ uint4 slot_memory[];  // VPT * kThreads vectors
  const uint32_t slots = smem_u32(slot_memory) + threadIdx.x * 16;
  __shared__ Partial warp_partials[kWarps];
  __shared__ Partial cluster_partials[2][kMaxCluster];  // by row parity: a peer may push row i+1's pair
                                                        // only after this CTA has read row i's (one barrier)
  __shared__ RowTotals totals;
  int parity = 0;

  int row = static_cast<int>(blockIdx.x) / cluster_size;
  int64_t target = row < rows ? args.targets[static_cast<int64_t>(row) * args.target_stride] : kIgnoreIndex;
  if (row < rows && target != kIgnoreIndex) {
    const uint16_t* row_ptr = args.logits + static_cast<int64_t>(row) * args.stride;
    prefetch_row<VPT>(row_ptr, thread_start<VPT>(row_ptr, rank), vocab, slots);
  }
  for (; row < rows; row += clusters) {
    const int next = row + clusters;
    const int64_t next_target =
        next < rows ? args.targets[static_cast<int64_t>(next) * args.target_stride] : kIgnoreIndex;
    const uint16_t* next_ptr = args.logits + static_cast<int64_t>(next) * args.stride;
    const bool prefetch_next = next < rows && next_target != kIgnoreIndex;
    uint16_t* row_ptr = args.logits + static_cast<int64_t>(row) * args.stride;
    const int start = thread_start<VPT>(row_ptr, rank);
    float* loss = args.loss + static_cast<int64_t>(row) * args.loss_stride;

    if (target == kIgnoreIndex) {
      // Nothing to read; every CTA of the cluster takes this branch (same row), so no cluster barrier.
      store_zeros<VPT>(row_ptr, start, vocab);
      if (rank == 0 && threadIdx.x == 0) *loss = 0.0f;
      if (prefetch_next) prefetch_row<VPT>(next_ptr, thread_start<VPT>(next_ptr, rank), vocab, slots);
      target = next_target;
      continue;
    }

    // The row's vectors: this thread's slots (its own copies, landed), the partial ends from global memory.
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    uint4 v[VPT];
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int at = start + j * kStep;
      v[j] = at >= 0 && at <= vocab - 8 ? slot_memory[j * kThreads + threadIdx.x] : edge_vector(row_ptr, at, vocab);
    }

    Partial p = warp_merge(thread_partial<VPT>(v));
    // The next row's copies, into the slots this thread has read (the merge above consumed every value
    // read from them): they land while this row is reduced over the cluster and written. Warp 0 issues
    // its copies after its fence below, so that the fence never waits for them.
    const int warp = static_cast<int>(threadIdx.x) >> 5;
    if (prefetch_next && warp != 0) prefetch_row<VPT>(next_ptr, thread_start<VPT>(next_ptr, rank), vocab, slots);

    if ((threadIdx.x & 31) == 0) warp_partials[warp] = p;
    __syncthreads();
    if (warp == 0) {
      p = warp_merge(threadIdx.x < kWarps ? warp_partials[threadIdx.x] : Partial{-INFINITY, 0.0f});
      if (threadIdx.x < cluster_size) {
        *cluster.map_shared_rank(&cluster_partials[parity][rank], threadIdx.x) = p;
        asm volatile("fence.acq_rel.cluster;" ::: "memory");
      }
      if (prefetch_next) prefetch_row<VPT>(next_ptr, thread_start<VPT>(next_ptr, rank), vocab, slots);
    }
    cluster_barrier();
    if (threadIdx.x == 0) totals = merge_row(cluster_partials[parity], cluster_size, args.count);
    parity ^= 1;
    __syncthreads();
    store_gradient<VPT>(v, row_ptr, start, vocab, static_cast<int>(target), totals, loss);
    target = next_target;
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

cudaLaunchAttribute cluster_attribute(unsigned cluster) {
  cudaLaunchAttribute attribute;
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = cluster;
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  return attribute;
}

// Launches the main kernel as the count kernel's programmatic dependent, in clusters of `cluster` CTAs.
template <typename Kernel>
cudaError_t launch_dependent(Kernel kernel, const Args& args, unsigned blocks, unsigned threads, unsigned cluster,
                             cudaStream_t stream, size_t dynamic_smem = 0) {
  cudaLaunchAttribute attributes[2];
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[0].val.programmaticStreamSerializationAllowed = 1;
  attributes[1] = cluster_attribute(cluster);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = dynamic_smem;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = cluster > 1 ? 2 : 1;
  return cudaLaunchKernelEx(&config, kernel, args);
}

// The fewest vectors per thread (of 1, 2, 4, 6, 8, 10, 12) that cover the row with 8 CTAs, then the fewest
// CTAs with that many. 0: wider than the largest (V over 196 600), the two-pass kernel: 16 vectors per
// thread would spill.
struct Shape {
  int vpt, cluster;
};

Shape shape_for(int64_t vectors) {
  for (int vpt : {1, 2, 4, 6, 8, 10, 12}) {
    const int64_t per_cta = static_cast<int64_t>(kThreads) * vpt;
    if (per_cta * kMaxCluster >= vectors) return {vpt, static_cast<int>((vectors + per_cta - 1) / per_cta)};
  }
  return {0, 0};
}

template <int VPT>
cudaError_t launch_vpt(const Args& args, int cluster, cudaStream_t stream) {
  return launch_dependent(cross_entropy_kernel<VPT>, args, static_cast<unsigned>(args.rows * cluster), kThreads,
                          static_cast<unsigned>(cluster), stream);
}

// v3's persistent launch: as many clusters as fit at once (asked of the occupancy API once per device and
// cluster size), never more than rows. 0 clusters (the query failed): v1's launch.
template <int VPT>
cudaError_t launch_persistent(const Args& args, int cluster, cudaStream_t stream) {
  constexpr size_t kSlotBytes = static_cast<size_t>(VPT) * kThreads * 16;
  static int cached_device = -1, cached_cluster = 0, fitting = 0;
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  if (device != cached_device || cluster != cached_cluster) {
    cudaLaunchAttribute attribute = cluster_attribute(static_cast<unsigned>(cluster));
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(static_cast<unsigned>(cluster));
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = kSlotBytes;
    config.attrs = &attribute;
    config.numAttrs = 1;
    if (cudaOccupancyMaxActiveClusters(&fitting, cross_entropy_persistent<VPT>, &config) != cudaSuccess) {
      cudaGetLastError();  // clear it: v1's launch follows
      fitting = 0;
    }
    cached_device = device;
    cached_cluster = cluster;
  }
  if (fitting < 1) return launch_vpt<VPT>(args, cluster, stream);
  const int64_t clusters = std::min<int64_t>(args.rows, fitting);
  return launch_dependent(cross_entropy_persistent<VPT>, args, static_cast<unsigned>(clusters * cluster), kThreads,
                          static_cast<unsigned>(cluster), stream, kSlotBytes);
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

  Args args;
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
  const auto stream = static_cast<cudaStream_t>(call->stream);

  count_kernel<<<1, 1024, 0, stream>>>(args.targets, args.rows, args.target_stride, static_cast<unsigned*>(call->workspace));
  // The most vectors a row can overlap (a row that starts 2 bytes past a 16-byte boundary).
  const Shape shape = shape_for((args.vocab + 7 + 7) / 8);
  cudaError_t error = cudaSuccess;
  switch (shape.vpt) {
    case 1: error = launch_vpt<1>(args, shape.cluster, stream); break;
    case 2: error = launch_vpt<2>(args, shape.cluster, stream); break;
    case 4: error = launch_vpt<4>(args, shape.cluster, stream); break;
    case 6: error = launch_vpt<6>(args, shape.cluster, stream); break;
    case 8: error = launch_persistent<8>(args, shape.cluster, stream); break;
    case 10: error = launch_persistent<10>(args, shape.cluster, stream); break;
    case 12: error = launch_vpt<12>(args, shape.cluster, stream); break;
    default: error = launch_dependent(cross_entropy_two_pass, args, static_cast<unsigned>(args.rows), 1024, 1, stream);
  }
  if (error == cudaSuccess) error = cudaGetLastError();
  if (error != cudaSuccess) return failed(call, cudaGetErrorString(error));
  return 0;
}
