// The small-M kernel of quant/fp8_block_gemm (1 <= M <= 64: decode batches, a weight stream).
//
// C^T = B A^T per 128-wide K block: the weight is wgmma's A operand (64 output channels per consumer
// warpgroup), the tokens its B operand (N = M padded to 8, 16, 32 or 64; TMA zero-fills the rows past M
// and cp.async the scales past M, so padding contributes exact zeros). Work is divided as smallm_plan.cuh
// says: Q clusters of C CTAs, a run of slabs to each cluster, 1/C of every slab's K blocks to each CTA.
//
// A CTA (384 threads, one per SM):
// - warpgroup 0: one thread issues, per unit, a TMA of the weight's 128 x 128 box (EVICT_FIRST: read
//   once), a TMA of the tokens' Mpad x 128 box (normal priority: every CTA reads them, and LRU keeps a
//   block of at most 8 KB that 132 CTAs read at about the same time), and cp.async copies of
//   the unit's token scales (sa's column, Mpad floats) and weight scale (one float) into a ring of
//   stages. A stage's full barrier completes on the TMA bytes and one cp.async arrival; its empty barrier
//   on one arrival per consumer warp.
// - warpgroups 1 and 2: 64 channels each. Per unit, four wgmma m64nMpadk32 over the block's 128 K (the
//   first one zeroes the accumulator), wait, then the promotion sum += acc * sa[m, kb] * sb[slab, kb] in
//   fp32: DeepSeek-V3's per-block rule.
// - At the end of a slab's K share the sum goes to shared memory ([token][channel]) and every consumer
//   warp arrives on the `ready` barrier of each CTA of the cluster. Once its own `ready` completes (the C
//   partials of the slab are all staged), a CTA sums its 1/C of the slab's outputs over the C staging
//   tiles, read through distributed shared memory in rank order (deterministic), rounds once to bf16 and
//   stores; then arrives on every CTA's `freed` barrier. A staging tile is rewritten (the next slab), and
//   a CTA exits, only once its `freed` completes: no CTA reads shared memory that has moved on or gone.
//
// Compared with partials in global memory behind flags (the kernel's first form, notes.md), the slab's
// reduction never leaves the SMs: no 32 KB fp32 store and fence per CTA, no flag polled across the GPU,
// and no cooperative launch, since no CTA ever waits on one outside its cluster.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cute/arch/cluster_sm90.hpp>
#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/arch/mma_sm90_desc.hpp>
#include <cute/arch/mma_sm90_gmma.hpp>
#include <cutlass/arch/barrier.h>

#include <cstdint>
#include <utility>

#include "smallm_plan.cuh"

// Where a call's time goes, for tools/fp8_smallm_probe.cu: it defines FP8_SMALLM_STAMP(event) before
// including this header (a timestamp of this CTA at one of the Stamp events); the solution compiles it away.
#ifndef FP8_SMALLM_STAMP
#define FP8_SMALLM_STAMP(event) ((void)0)
#endif

namespace fp8_block_gemm {
namespace smallm {

// The events FP8_SMALLM_STAMP marks, in a CTA's order. Those a CTA passes more than once (a slab's
// end, a reduction) keep the last.
enum Stamp {
  kEntry,        // thread 0, before the barriers' initialization
  kInitDone,     // the first consumer thread, after the cluster's barrier (every CTA's barriers initialized)
  kFirstIssue,   // the producer, its first unit's loads issued
  kLastIssue,    // the producer, its last unit's loads issued
  kFirstFull,    // the first consumer thread, its first unit landed
  kStreamEnd,    // ... a slab's last unit promoted
  kStaged,       // ... the slab's partial sum in shared memory, the cluster told
  kClusterReady, // ... every partial of the slab in the cluster staged
  kReduced,      // ... its share of the slab written
  kExit,         // ... done
  kStampCount
};

constexpr int kThreads = 384;          // a producer warpgroup and two consumer warpgroups
constexpr int kConsumerThreads = 256;
constexpr int kConsumerWarps = 8;      // arrivals that free a stage
constexpr int kMaxStages = 10;
constexpr int kSmemLimit = 227 * 1024; // the H100/H200 per-block opt-in maximum
constexpr int kWeightBoxBytes = kSlab * kKBlock;  // 16 KB
constexpr int kNamedBarrier = 1;       // the consumers' barrier (0 is __syncthreads)

// L2 cache hints of the TMA loads (createpolicy encodings CUTLASS names TMA::CacheHintSm90).
constexpr uint64_t kEvictFirst = 0x12F0000000000000ull;
constexpr uint64_t kEvictNormal = 0x1000000000000000ull;

template <int kN, int kStages>
struct alignas(1024) Shared {
  uint8_t weight[kStages][kWeightBoxBytes];  // 128 channels x 128 bytes of K, 128-byte swizzle
  uint8_t tokens[kStages][kN * kKBlock];     // kN tokens x 128 bytes of K (a multiple of 1024 bytes)
  float staging[kN * kStagingStride];        // a slab's partial sum, [token][channel]
  float sa[kStages][kN];                     // the unit's token scales (16-byte chunks by cp.async)
  float sb[kStages][4];                      // the unit's weight scale in [0]
  uint64_t full[kStages];
  uint64_t empty[kStages];
  uint64_t ready;  // the cluster's partials of the current slab are staged (C x 8 warp arrivals)
  uint64_t freed;  // the cluster has read this CTA's staging tile (C x 8 warp arrivals)
};

template <int kN, int kStages>
constexpr int shared_bytes() {
  return static_cast<int>(sizeof(Shared<kN, kStages>)) + 1024;  // + the alignment of the dynamic base
}

// The most stages (at most kMaxStages) whose shared memory fits.
template <int kN, int S = kMaxStages>
struct StagesFor {
  static constexpr int value = shared_bytes<kN, S>() <= kSmemLimit ? S : StagesFor<kN, S - 1>::value;
};
template <int kN>
struct StagesFor<kN, 1> {
  static constexpr int value = 1;
};

// The dynamic shared memory gemm_kernel<kN> is launched with.
template <int kN>
constexpr int kernel_shared_bytes = shared_bytes<kN, StagesFor<kN>::value>();

struct Params {
  CUtensorMap weight_map;  // b [N, K] e4m3 as (K, N) bytes, box 128 x 128, 128-byte swizzle
  CUtensorMap token_map;   // a [M, K] e4m3 as (K, M) bytes, box 128 x Mpad, 128-byte swizzle
  const float* sa;         // [KB][sa_ld], token contiguous
  const float* sb;         // [slabs][KB]
  __nv_bfloat16* c;        // [M][N]
  int m, n, sa_ld;
  Plan plan;
};

// ---------------------------------------------------------------------------------------------------
// Device helpers

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// A K-major operand tile in the 128-byte swizzle (rows of 128 bytes, 8-row groups 1024 bytes apart), as
// wgmma reads it: layout type 1 (SWIZZLE_128B), leading byte offset unused (1), stride byte offset 1024.
// The tile starts 1024-byte aligned; K step k (32 e4m3) starts 32 k bytes in (2 k in the 16-byte units of
// the start address).
__device__ __forceinline__ uint64_t operand_desc(uint32_t smem_address) {
  cute::GmmaDescriptor d;
  d.bitfield.start_address_ = static_cast<uint16_t>(smem_address >> 4);
  d.bitfield.leading_byte_offset_ = 1;
  d.bitfield.stride_byte_offset_ = 1024 >> 4;
  d.bitfield.base_offset_ = 0;
  d.bitfield.layout_type_ = 1;
  return d.desc_;
}

template <int kN>
struct MmaOp;
template <>
struct MmaOp<8> {
  using type = cute::SM90::GMMA::MMA_64x8x32_F32E4M3E4M3_SS_TN<>;
};
template <>
struct MmaOp<16> {
  using type = cute::SM90::GMMA::MMA_64x16x32_F32E4M3E4M3_SS_TN<>;
};
template <>
struct MmaOp<32> {
  using type = cute::SM90::GMMA::MMA_64x32x32_F32E4M3E4M3_SS_TN<>;
};
template <>
struct MmaOp<64> {
  using type = cute::SM90::GMMA::MMA_64x64x32_F32E4M3E4M3_SS_TN<>;
};

template <class Op, size_t... I>
__device__ __forceinline__ void mma_expand(uint64_t da, uint64_t db, float* acc, cute::SM90::GMMA::ScaleOut scale,
                                           std::index_sequence<I...>) {
  Op::fma(da, db, acc[I]..., scale);
}

// acc (+)= W[64 x 32] T[kN x 32]^T for one K step.
template <int kN>
__device__ __forceinline__ void mma(uint64_t da, uint64_t db, float (&acc)[kN / 2], bool accumulate) {
  mma_expand<typename MmaOp<kN>::type>(da, db, acc,
                                       accumulate ? cute::SM90::GMMA::ScaleOut::One : cute::SM90::GMMA::ScaleOut::Zero,
                                       std::make_index_sequence<kN / 2>{});
}

// mbarrier wait (phase parity) and arrive, with memory clobbers: the compiler must not move the stage's
// shared-memory reads (the scales) above the wait or below the release.
__device__ __forceinline__ void wait_barrier(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred ready;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 ready, [%0], %1;\n"
      "@!ready bra WAIT;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void arrive_barrier(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

// The same barrier in CTA `rank` of the cluster, by its shared::cluster address; a relaxed arrival that
// orders nothing by itself (release_to_cluster() before it makes it a release).
__device__ __forceinline__ void arrive_cluster_barrier(uint64_t* bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32(bar)), "r"(rank));
  asm volatile("mbarrier.arrive.relaxed.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}
// A fence that makes the arrivals after it releases at cluster scope: the calling thread's writes before
// it (and those of its warp, after a __syncwarp) are visible to whoever acquires those barriers. One
// MEMBAR.GPU, which also waits for the thread's global stores in flight, for all C arrivals.
__device__ __forceinline__ void release_to_cluster() { asm volatile("fence.acq_rel.cluster;\n" ::: "memory"); }
// Wait (acquire at cluster scope: the other CTAs' writes released by their arrivals are visible after it).
__device__ __forceinline__ void wait_cluster_barrier(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred ready;\n"
      "WAIT_CLUSTER:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 ready, [%0], %1;\n"
      "@!ready bra WAIT_CLUSTER;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}
// A generic pointer to `p`'s counterpart in the shared memory of CTA `rank` of the cluster.
template <class T>
__device__ __forceinline__ const T* cluster_pointer(const T* p, uint32_t rank) {
  uint64_t remote;
  asm volatile("mapa.u64 %0, %1, %2;\n" : "=l"(remote) : "l"(p), "r"(rank));
  return reinterpret_cast<const T*>(remote);
}

__device__ __forceinline__ void named_sync() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(kNamedBarrier), "n"(kConsumerThreads) : "memory");
}

// 16 bytes global -> shared, of which `bytes` (0..16) are read and the rest zero-filled.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src) : "memory");
}
// One arrival on `bar` once every cp.async this thread issued so far has landed (counted in the barrier's
// expected arrivals: noinc).
__device__ __forceinline__ void cp_async_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// ---------------------------------------------------------------------------------------------------
// Where a CTA works: its cluster's slabs [s0, s1) and, of each, the K blocks [k0, k1).

struct Range {
  int rank;    // in the cluster
  int s0, s1;  // slabs
  int k0, k1;  // K blocks of each slab
};

__device__ __forceinline__ Range range_of(const Plan& p) {
  const int q = static_cast<int>(blockIdx.x) / p.cluster, r = static_cast<int>(blockIdx.x) % p.cluster;
  return {r, slab_begin(p, q), slab_begin(p, q + 1), k_begin(p, r), k_begin(p, r + 1)};
}

// ---------------------------------------------------------------------------------------------------
// The producer: one thread.

template <int kN, int kStages>
__device__ __forceinline__ void produce(const Params& p, Shared<kN, kStages>& sm, const Range& range) {
  constexpr uint32_t kTx = kWeightBoxBytes + kN * kKBlock;
  int stage = 0;
  uint32_t phase = 0;
  for (int s = range.s0; s < range.s1; ++s) {
    for (int kb = range.k0; kb < range.k1; ++kb) {
      wait_barrier(&sm.empty[stage], phase ^ 1);
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&sm.full[stage], kTx);
      cute::SM90_TMA_LOAD_2D::copy(&p.weight_map, &sm.full[stage], kEvictFirst, sm.weight[stage], kb * kKBlock,
                                   s * kSlab);
      cute::SM90_TMA_LOAD_2D::copy(&p.token_map, &sm.full[stage], kEvictNormal, sm.tokens[stage], kb * kKBlock, 0);
      const float* column = p.sa + static_cast<int64_t>(kb) * p.sa_ld;
#pragma unroll
      for (int c = 0; c < kN / 4; ++c) {
        const int left = p.m - 4 * c;
        const int bytes = left <= 0 ? 0 : (left >= 4 ? 16 : 4 * left);
        cp_async_16(smem_u32(&sm.sa[stage][4 * c]), bytes > 0 ? column + 4 * c : column, bytes);
      }
      cp_async_4(smem_u32(&sm.sb[stage][0]), p.sb + static_cast<int64_t>(s) * p.plan.kb + kb);
      cp_async_arrive(&sm.full[stage]);
      if (s == range.s0 && kb == range.k0) FP8_SMALLM_STAMP(kFirstIssue);
      if (++stage == kStages) stage = 0, phase ^= 1;
    }
  }
  FP8_SMALLM_STAMP(kLastIssue);
  cp_async_wait_all();
}

// ---------------------------------------------------------------------------------------------------
// The consumers: 256 threads, `t` 0..255; warpgroup t / 128 owns channels 64 (t / 128) .. + 63 of a slab.

template <int kN, int kStages>
__device__ __forceinline__ void consume(const Params& p, Shared<kN, kStages>& sm, const Range& range, int t) {
  constexpr int kV = kN / 2;  // accumulator values per thread
  const int wg = t / 128, wt = t % 128, lane = t % 32;
  const int cluster = p.plan.cluster;
  const uint32_t weight_base = smem_u32(&sm.weight[0][0]) + wg * 64 * kKBlock;
  const uint32_t token_base = smem_u32(&sm.tokens[0][0]);
  // This CTA's share of a slab's outputs, in float4s of its M x 128 tile.
  const int share0 = share_begin(range.rank, cluster, p.m), share1 = share_begin(range.rank + 1, cluster, p.m);

  float acc[kV], sum[kV];
  int stage = 0;
  uint32_t phase = 0;
  for (int s = range.s0; s < range.s1; ++s) {
    const uint32_t round = static_cast<uint32_t>(s - range.s0);
#pragma unroll
    for (int i = 0; i < kV; ++i) sum[i] = 0.0f;

    for (int kb = range.k0; kb < range.k1; ++kb) {
      wait_barrier(&sm.full[stage], phase);
      if (t == 0 && s == range.s0 && kb == range.k0) FP8_SMALLM_STAMP(kFirstFull);
      const uint64_t da = operand_desc(weight_base + stage * kWeightBoxBytes);
      const uint64_t db = operand_desc(token_base + stage * (kN * kKBlock));
#pragma unroll
      for (int i = 0; i < kV; ++i) cute::warpgroup_fence_operand(acc[i]);
      cute::warpgroup_arrive();
#pragma unroll
      for (int k = 0; k < kKBlock / 32; ++k) mma<kN>(da + 2 * k, db + 2 * k, acc, k > 0);
      cute::warpgroup_commit_batch();
      cute::warpgroup_wait<0>();
#pragma unroll
      for (int i = 0; i < kV; ++i) cute::warpgroup_fence_operand(acc[i]);

      // The block's scales: this thread's tokens are 8 j + 2 (lane % 4) + {0, 1}.
      const float weight_scale = sm.sb[stage][0];
      float scale[kN / 4];
#pragma unroll
      for (int j = 0; j < kN / 8; ++j) {
        const float2 v = *reinterpret_cast<const float2*>(&sm.sa[stage][8 * j + 2 * (lane % 4)]);
        scale[2 * j] = v.x * weight_scale;
        scale[2 * j + 1] = v.y * weight_scale;
      }
      __syncwarp();
      if (lane == 0) arrive_barrier(&sm.empty[stage]);
#pragma unroll
      for (int i = 0; i < kV; ++i) sum[i] = fmaf(acc[i], scale[2 * (i / 4) + i % 2], sum[i]);
      if (++stage == kStages) stage = 0, phase ^= 1;
    }
    if (t == 0) FP8_SMALLM_STAMP(kStreamEnd);

    // The partial sum into the staging tile, [token][channel], once the cluster has read the last slab's.
    if (round > 0) wait_cluster_barrier(&sm.freed, (round - 1) & 1);
#pragma unroll
    for (int i = 0; i < kV; ++i)
      sm.staging[fragment_col(wt, i) * kStagingStride + wg * 64 + fragment_row(wt, i)] = sum[i];
    __syncwarp();
    if (lane == 0) {
      release_to_cluster();
      for (int r = 0; r < cluster; ++r) arrive_cluster_barrier(&sm.ready, static_cast<uint32_t>(r));
    }
    if (t == 0) FP8_SMALLM_STAMP(kStaged);

    // This CTA's share of the slab: the C partials summed in rank order, bf16, 4 channels (8 bytes) a store.
    wait_cluster_barrier(&sm.ready, round & 1);
    if (t == 0) FP8_SMALLM_STAMP(kClusterReady);
    const int n0 = s * kSlab;
    for (int f = share0 + t; f < share1; f += kConsumerThreads) {
      const int m = f / (kSlab / 4), c4 = (f % (kSlab / 4)) * 4;
      const int offset = m * kStagingStride + c4;
      float4 total = *reinterpret_cast<const float4*>(cluster_pointer(&sm.staging[offset], 0));
      for (int r = 1; r < cluster; ++r) {
        const float4 v = *reinterpret_cast<const float4*>(cluster_pointer(&sm.staging[offset], static_cast<uint32_t>(r)));
        total.x += v.x, total.y += v.y, total.z += v.z, total.w += v.w;
      }
      if (n0 + c4 < p.n)
        *reinterpret_cast<uint2*>(p.c + static_cast<int64_t>(m) * p.n + n0 + c4) =
            make_uint2(pack_bf16(total.x, total.y), pack_bf16(total.z, total.w));
    }
    // The warp's reads of the staging tiles have returned (the stores above used them): a relaxed arrival
    // frees the tiles without waiting for the bf16 stores to reach memory.
    __syncwarp();
    if (lane == 0)
      for (int r = 0; r < cluster; ++r) arrive_cluster_barrier(&sm.freed, static_cast<uint32_t>(r));
    if (t == 0) FP8_SMALLM_STAMP(kReduced);
  }
  // No exit while a CTA of the cluster may still read this one's staging tile.
  if (range.s1 > range.s0) wait_cluster_barrier(&sm.freed, static_cast<uint32_t>(range.s1 - range.s0 - 1) & 1);
  if (t == 0) FP8_SMALLM_STAMP(kExit);
}

template <int kN>
__global__ void __launch_bounds__(kThreads, 1) gemm_kernel(const __grid_constant__ Params p) {
  constexpr int kStages = StagesFor<kN>::value;
  extern __shared__ __align__(1024) uint8_t shared_raw[];
  // Rounded up to 1024 bytes (the 128-byte swizzle's period) by an offset, so that the compiler keeps
  // knowing the pointer is shared memory. Every CTA has the same layout, so a pointer into this CTA's
  // tile maps (mapa) onto the same tile of another CTA of the cluster.
  auto& sm = *reinterpret_cast<Shared<kN, kStages>*>(shared_raw + ((1024u - (smem_u32(shared_raw) & 1023u)) & 1023u));
  const Range range = range_of(p.plan);

  if (threadIdx.x == 0) {
    FP8_SMALLM_STAMP(kEntry);
    for (int s = 0; s < kStages; ++s) {
      cutlass::arch::ClusterTransactionBarrier::init(&sm.full[s], 2);  // the TMA bytes' arrival + cp.async's
      cutlass::arch::ClusterBarrier::init(&sm.empty[s], kConsumerWarps);
    }
    cutlass::arch::ClusterBarrier::init(&sm.ready, p.plan.cluster * kConsumerWarps);
    cutlass::arch::ClusterBarrier::init(&sm.freed, p.plan.cluster * kConsumerWarps);
    cutlass::arch::fence_barrier_init();
    cute::prefetch_tma_descriptor(reinterpret_cast<const cute::TmaDescriptor*>(&p.weight_map));
    cute::prefetch_tma_descriptor(reinterpret_cast<const cute::TmaDescriptor*>(&p.token_map));
  }
  // Every CTA's barriers initialized before any CTA of the cluster arrives on them.
  cute::cluster_sync();
  if (threadIdx.x == 128) FP8_SMALLM_STAMP(kInitDone);
  if (threadIdx.x < 128) {
    if (threadIdx.x == 0) produce<kN, kStages>(p, sm, range);
    return;
  }
  consume<kN, kStages>(p, sm, range, static_cast<int>(threadIdx.x) - 128);
}

// ---------------------------------------------------------------------------------------------------
// Host side

// cuTensorMapEncodeTiled through the runtime's entry point query (the build links no libcuda). Its type
// from cuda.h's declaration: CUTLASS includes cudaTypedefs.h inside its own namespace, so the PFN_
// typedefs are not reliably at global scope.
using EncodeTiled = decltype(&cuTensorMapEncodeTiled);

inline EncodeTiled encode_function() {
  static EncodeTiled fn = nullptr;
  if (fn == nullptr) {
    void* pfn = nullptr;
    cudaDriverEntryPointQueryResult status;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &pfn, 12000, cudaEnableDefault, &status) ==
            cudaSuccess &&
        status == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<EncodeTiled>(pfn);
  }
  return fn;
}

// A row-major [rows, cols] byte matrix as TMA's (cols, rows), a box of box_cols x box_rows, 128-byte swizzle;
// rows past the end read as zeros.
inline bool encode_rows(CUtensorMap* map, const void* base, int64_t rows, int64_t cols, uint32_t box_cols,
                        uint32_t box_rows) {
  const auto fn = encode_function();
  if (fn == nullptr) return false;
  cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols)};
  cuuint32_t box[2] = {box_cols, box_rows};
  cuuint32_t element_strides[2] = {1, 1};
  return fn(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims, strides, box, element_strides,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

inline int padded_tokens(int m) { return m <= 8 ? 8 : m <= 16 ? 16 : m <= 32 ? 32 : 64; }

inline cudaLaunchConfig_t launch_config(int grid, int cluster, int bytes, cudaStream_t stream,
                                        cudaLaunchAttribute* attribute) {
  attribute->id = cudaLaunchAttributeClusterDimension;
  attribute->val.clusterDim.x = static_cast<unsigned>(cluster);
  attribute->val.clusterDim.y = 1;
  attribute->val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = static_cast<size_t>(bytes);
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = 1;
  return config;
}

// How many clusters of c CTAs (c = 1 .. kMaxCluster) gemm_kernel<kN> runs at once on the current device,
// asked once per device (0: that cluster size cannot launch). Null when the device refuses the kernel.
template <int kN>
const int* resident_clusters() {
  constexpr int kBytes = kernel_shared_bytes<kN>;
  static_assert(kBytes <= kSmemLimit, "one CTA's shared memory");
  static int configured_device = -1, resident[kMaxCluster + 1] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return nullptr;
  if (device != configured_device) {
    if (cudaFuncSetAttribute(gemm_kernel<kN>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes) != cudaSuccess ||
        cudaFuncSetAttribute(gemm_kernel<kN>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)
      return nullptr;
    for (int c = 1; c <= kMaxCluster; ++c) {
      cudaLaunchAttribute attribute;
      const cudaLaunchConfig_t config = launch_config(c, c, kBytes, nullptr, &attribute);
      int count = 0;
      resident[c] = cudaOccupancyMaxActiveClusters(&count, gemm_kernel<kN>, &config) == cudaSuccess ? count : 0;
    }
    cudaGetLastError();  // a size the device refuses leaves its error behind
    configured_device = device;
  }
  return resident;
}

// The plan of an M x N x K call on the current device (cluster 0: none fits).
inline Plan plan_for(int m, int n, int k) {
  const int* resident = nullptr;
  switch (padded_tokens(m)) {
    case 8: resident = resident_clusters<8>(); break;
    case 16: resident = resident_clusters<16>(); break;
    case 32: resident = resident_clusters<32>(); break;
    default: resident = resident_clusters<64>(); break;
  }
  if (resident == nullptr) return Plan{0, 0, 0, 0, 0};
  return make_plan(n, k, resident);
}

template <int kN>
cudaError_t launch_padded(const Params& params, cudaStream_t stream) {
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config =
      launch_config(params.plan.grid, params.plan.cluster, kernel_shared_bytes<kN>, stream, &attribute);
  return cudaLaunchKernelEx(&config, gemm_kernel<kN>, params);
}

// Whether the kernel takes these operands (16-byte aligned a, b, sa and c; 4-byte sb).
inline bool supports(const void* a, const float* sa, const void* b, const float* sb, const void* c, int m) {
  auto aligned = [](const void* p, uintptr_t to) { return reinterpret_cast<uintptr_t>(p) % to == 0; };
  return m >= 1 && m <= 64 && aligned(a, 16) && aligned(sa, 16) && aligned(b, 16) && aligned(c, 16) && aligned(sb, 4);
}

// Runs C = the block-scaled product for 1 <= M <= 64 on `stream`. cudaErrorInvalidValue: nothing was
// launched (no plan fits the device, or a tensor map TMA does not take), and the caller may take another
// path; any other error is the launch's own.
inline cudaError_t run(const void* a, const float* sa, const void* b, const float* sb, void* c, int m, int n, int k,
                       int sa_ld, cudaStream_t stream) {
  Params params;
  params.plan = plan_for(m, n, k);
  if (params.plan.cluster < 1) return cudaErrorInvalidValue;
  const int padded = padded_tokens(m);
  if (!encode_rows(&params.weight_map, b, n, k, kKBlock, kSlab) ||
      !encode_rows(&params.token_map, a, m, k, kKBlock, static_cast<uint32_t>(padded)))
    return cudaErrorInvalidValue;
  params.sa = sa;
  params.sb = sb;
  params.c = static_cast<__nv_bfloat16*>(c);
  params.m = m;
  params.n = n;
  params.sa_ld = sa_ld;
  switch (padded) {
    case 8: return launch_padded<8>(params, stream);
    case 16: return launch_padded<16>(params, stream);
    case 32: return launch_padded<32>(params, stream);
    default: return launch_padded<64>(params, stream);
  }
}

}  // namespace smallm
}  // namespace fp8_block_gemm
