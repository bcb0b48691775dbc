// The attention kernel on Hopper (wgmma, TMA, mbarriers): one CTA per (sequence, head block, range of
// split_pages pages), three warpgroups.
// - Warpgroup 0, the producer: gives back its registers; one thread copies the head block's queries once
//   (TMA, 9 boxes of Rows x 64 columns) and then the range's pages through a ring of two 72 KB stages
//   (9 boxes a page, the page number read from the block table one page ahead). With 128 heads the two
//   head blocks of a sequence are a cluster of two CTAs: each CTA's producer copies half the rows of every
//   page (32 x 576) and multicasts it to both, so a page is read from L2 once for all 128 heads; a stage is
//   refilled only when the consumers of both CTAs have released it.
// - Warpgroup 1, the softmax warpgroup: S = Q K^T (64 x 64 over 576 columns, both operands in shared
//   memory) for every page, the online softmax on its fp32 accumulator in registers, P rounded to bf16 as
//   the register A operand of O[:, 0:256] += P V[:, 0:256] (V^T read MN-major from the page's first 256
//   columns by the descriptor). It hands P (bf16) and each row's rescale factor to warpgroup 2 through
//   shared memory.
// - Warpgroup 2: O[:, 256:512] += P V[:, 256:512] with P from shared memory.
// S_{n+1} and O += P_n V_n are issued back to back: the softmax of page n + 1 runs while the tensor cores
// finish page n's products, and warpgroup 2's product of page n + 1 covers warpgroup 1's turn around.
//
// A row's factor is exactly 1 when its page did not raise its maximum; a warp whose 16 rows all kept
// theirs skips the output's rescale (a multiply of 128 accumulators per thread), which after the first
// pages of a long context is most warps. (Moving the maximum only past a margin, FlashAttention-4's trick,
// would skip more, but then a row's largest probability is no longer exactly 1 before its bf16 rounding:
// modelled in numpy, o's nmse rises from 2.4-3.6e-6 to 4.5-5.8e-6 against the bound of 5e-6.)
//
// Rows of a page past seq_len (only on a sequence's last page) are TMA's copy of whatever the cache holds
// there: their scores are set to -inf before the maximum (probability exactly 0), and their first 512
// columns are zeroed in shared memory before the P V products, so that a non-finite value left there by a
// freed sequence cannot turn 0 x Inf into NaN.
//
// With 16 heads (tensor parallel 8) the head block is 16 real rows of the 64 that wgmma computes: the other
// 48 query rows are zeroed once, their outputs never stored.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/bfloat16.h>
#include <cutlass/numeric_conversion.h>

#include <cstdint>

#include "plan.cuh"

namespace mla {

using namespace cute;
using Element = cutlass::bfloat16_t;

constexpr int kBlockM = 64;                  // rows of every wgmma: the head block, padded to 64
constexpr int kHalf = kValues / 2;           // output columns of each consumer warpgroup
constexpr int kColumnBlock = kBlockM * 64;   // elements of one 64-column block of a 64-row tile (8 KB)
constexpr int kStageElements = kPage * kWidth;
constexpr int kConsumerWarps = 8;            // the warps that release a stage
constexpr int kThreads = 384;                // producer, softmax warpgroup, second warpgroup
constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;  // 128 (40 + 2 x 232) <= 65536

// Shared-memory tiles in the 128-byte swizzle that wgmma and TMA share: rows of 64-column blocks.
using SmemLayoutQ = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<kBlockM>, Int<kWidth>>{}));
// One page stage: (64 keys, 576 columns); the stages follow each other kStageElements apart.
using SmemLayoutPage = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<kPage>, Int<kWidth>>{}));
// V^T for one consumer: (256 value columns, 64 keys), the same bytes as the first 256 columns of a stage,
// value columns fastest: the MN-major B operand of P V. The second half is this layout moved by 4 column
// blocks (the tile repeats every 64 columns).
using SmemLayoutVt = decltype(composition(SmemLayoutPage{}, Layout<Shape<Int<kHalf>, Int<kPage>>, Stride<Int<kPage>, _1>>{}));
constexpr int kSecondHalf = (kHalf / 64) * kColumnBlock;
// P (bf16) for the second warpgroup: the K-major A operand of its P V.
using SmemLayoutP = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<kBlockM>, Int<kPage>>{}));
// One TMA box: Rows x 64 columns.
template <int Rows>
using SmemLayoutBox = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<Rows>, _64>{}));

// S = Q K^T: (64 heads, 64 keys, 576), both operands K-major in shared memory.
using MmaS = decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBlockM>, Int<kPage>, Int<kWidth>>>()));
// O[:, half] += P V[:, half]: (64 heads, 256 columns, 64 keys); P from registers (warpgroup 1) or shared
// memory (warpgroup 2), V^T MN-major in shared memory.
using MmaO1 = decltype(make_tiled_mma(GMMA::rs_op_selector<Element, Element, float, Shape<Int<kBlockM>, Int<kHalf>, Int<kPage>>,
                                                           GMMA::Major::K, GMMA::Major::MN>()));
using MmaO2 = decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBlockM>, Int<kHalf>, Int<kPage>>,
                                                           GMMA::Major::K, GMMA::Major::MN>()));

// A [X, 576, Y] view for TMA: q as (head, column, sequence), the cache as (token, column, page).
using GmemShape = Shape<int32_t, int32_t, int32_t>;
using GmemStride = Stride<int64_t, _1, int64_t>;
using GmemTensor = decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), GmemShape{}, GmemStride{}));

// A kernel configuration: Rows real heads per CTA (64, or 16), Cluster CTAs sharing each page (2: the two
// head blocks of 128 heads; else 1).
template <int Rows, int Cluster>
struct Config {
  static_assert(Rows == 16 || Rows == 64, "a head block is 16 or 64 rows");
  static_assert(Cluster == 1 || (Cluster == 2 && Rows == 64), "pairs of 64-head blocks share pages");
  static constexpr int kRows = Rows;
  static constexpr int kCluster = Cluster;
  static constexpr int kBoxRows = kPage / Cluster;  // rows of a page each CTA copies
  using PageLoad = conditional_t<Cluster == 1, SM90_TMA_LOAD, SM90_TMA_LOAD_MULTICAST>;
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutBox<Rows>{}, Shape<Int<Rows>, _64>{}, _1{}));
  using TmaPage =
      decltype(make_tma_copy(PageLoad{}, GmemTensor{}, SmemLayoutBox<kBoxRows>{}, Shape<Int<kBoxRows>, _64>{}, _1{}));
  struct KernelParams {
    TmaQ tma_q;
    TmaPage tma_page;
    GmemShape q_shape, cache_shape;  // (H, 576, B) and (64, 576, NB)
    Params common;
  };
};

struct SharedStorage {
  array_aligned<Element, cosize_v<SmemLayoutQ>, 1024> q;
  array_aligned<Element, kStages * kStageElements, 1024> pages;
  array_aligned<Element, cosize_v<SmemLayoutP>, 1024> p;
  float rescale[kBlockM];  // the current page's factor per row, from warpgroup 1 to warpgroup 2
  float row_max[kBlockM], row_sum[kBlockM];  // at the end, the same way
  uint64_t q_full;
  uint64_t full[kStages], empty[kStages];
  uint64_t p_full, p_empty;
};
// Dynamic shared memory is aligned here to the 1024 bytes of a swizzle atom.
constexpr int kSharedBytes = static_cast<int>(sizeof(SharedStorage)) + 1024;
static_assert(kSharedBytes <= 227 * 1024, "one CTA per SM");
static_assert(cosize_v<SmemLayoutPage> == kStageElements && cosize_v<SmemLayoutQ> == kStageElements, "dense 64 x 576 tiles");

// The same pointer, opaque to the compiler: wgmma descriptors derived from it are rebuilt where they are
// used instead of being hoisted out of the page loop (36 of them per operand, which would spill).
template <class T>
__device__ __forceinline__ T* opaque(T* pointer) {
  asm volatile("" : "+l"(pointer));
  return pointer;
}

// Byte offset of element (row, col) of a 64-row tile stored as 64-column blocks (Q, one page stage, P) in
// the 128-byte swizzle: 16-byte chunk c of row r at chunk c ^ (r % 8); the tile starts 1024-byte aligned.
__host__ __device__ constexpr uint32_t tile_offset(int row, int col) {
  return static_cast<uint32_t>((col / 64) * (kColumnBlock * 2) + row * 128 + ((((col / 8) % 8) ^ (row % 8)) * 16) + (col % 8) * 2);
}

// A ring of shared-memory stages: which one is next and the parity of its barriers' current phase.
struct Ring {
  int stage = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == kStages) stage = 0, phase ^= 1;
  }
};

using Barrier = cutlass::arch::ClusterBarrier;
using TxBarrier = cutlass::arch::ClusterTransactionBarrier;

// Named barriers (0 is __syncthreads): each consumer warpgroup alone, and the two together.
enum : int { kBarrierFirst = 1, kBarrierSecond = 2, kBarrierBoth = 3 };
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// The accumulator fragment of a 64 x N wgmma, per thread: value i is row (lane / 4) + 8 ((i / 2) % 2) of the
// warp's 16 and column 8 (i / 4) + 2 (lane % 4) + i % 2.
__device__ __forceinline__ int fragment_half(int i) { return (i / 2) % 2; }
__device__ __forceinline__ int fragment_column(int i, int lane) { return 8 * (i / 4) + 2 * (lane % 4) + i % 2; }
__device__ __forceinline__ int fragment_row(int h, int thread) { return thread / 32 * 16 + thread % 32 / 4 + 8 * h; }

// Issues one wgmma batch (every K block of the operands) and commits it; the caller waits.
template <bool ZeroInit, class Mma, class A, class B, class C>
__device__ __forceinline__ void issue_gemm(Mma& mma, A& a, B const& b, C& c) {
  constexpr bool kRegisterA = !is_base_of<GMMA::DescriptorIterator, typename Mma::FrgTypeA>::value;
  if constexpr (kRegisterA) warpgroup_fence_operand(a);
  warpgroup_fence_operand(c);
  warpgroup_arrive();
  mma.accumulate_ = ZeroInit ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
  CUTLASS_PRAGMA_UNROLL
  for (int kb = 0; kb < size<2>(a); ++kb) {
    cute::gemm(mma, a(_, _, kb), b(_, _, kb), c);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
}

// Zeroes rows [first_row, 64) x columns [col0, col0 + cols) of a 64-row tile at shared address `tile`, in
// 16-byte chunks, by the 128 threads of one warpgroup.
__device__ __forceinline__ void zero_rows(uint32_t tile, int first_row, int col0, int cols, int thread) {
  const int chunks = cols / 8;
  for (int i = thread; i < (kBlockM - first_row) * chunks; i += 128) {
    const int row = first_row + i / chunks, col = col0 + (i % chunks) * 8;
    asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(tile + tile_offset(row, col)), "r"(0) : "memory");
  }
}

// Gives a stage back to the producers of every CTA of the cluster: one arrival per warp, after its wgmma
// reads of the stage are complete.
template <int Cluster>
__device__ __forceinline__ void release_stage(uint64_t* empty, int lane) {
  __syncwarp();
  if (lane == 0) {
    if constexpr (Cluster == 1) {
      Barrier::arrive(empty);
    } else {
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < Cluster; ++c) Barrier::arrive(empty, static_cast<uint32_t>(c), 1u);
    }
  }
}

// Multiplies a 64 x N accumulator's rows by their factors, unless every row of the warp keeps factor 1.
template <class Frag>
__device__ __forceinline__ void rescale_rows(Frag& o, const float (&factor)[2]) {
  if (!__any_sync(0xffffffffu, factor[0] != 1.0f || factor[1] != 1.0f)) return;
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(o); ++i) o(i) *= factor[fragment_half(i)];
}

// The online softmax of one page on S (in place: S becomes 2^(scale_log2 s - max), keys at or past `valid`
// exactly 0); updates the running maximum and sum, and returns through `factor` what the rows' earlier
// output must be multiplied by (exactly 1 when the maximum stays).
template <class Frag>
__device__ __forceinline__ void softmax_page(Frag& s, int valid, int lane, float scale_log2, float (&row_max)[2],
                                             float (&row_sum)[2], float (&factor)[2]) {
  if (valid < kPage) {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(s); ++i)
      if (fragment_column(i, lane) >= valid) s(i) = -INFINITY;
  }
  float page_max[2] = {-INFINITY, -INFINITY};
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(s); ++i) page_max[fragment_half(i)] = fmaxf(page_max[fragment_half(i)], s(i));
  float shift[2];
  CUTLASS_PRAGMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    page_max[h] = fmaxf(page_max[h], __shfl_xor_sync(0xffffffffu, page_max[h], 1));
    page_max[h] = fmaxf(page_max[h], __shfl_xor_sync(0xffffffffu, page_max[h], 2));
    // Every page holds a key of the context, so page_max is finite; the first page always moves the
    // maximum from -inf (factor 2^-inf = 0 against a zero output and sum).
    const float top = page_max[h] * scale_log2;
    if (top > row_max[h]) {
      factor[h] = exp2_approx(row_max[h] - top);
      row_max[h] = top;
    } else {
      factor[h] = 1.0f;
    }
    row_sum[h] *= factor[h];
    shift[h] = -row_max[h];
  }
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(s); ++i) {
    const int h = fragment_half(i);
    s(i) = exp2_approx(fmaf(s(i), scale_log2, shift[h]));
    row_sum[h] += s(i);
  }
}

// Normalizes a consumer's 64 x 256 output and stores the block's real rows: bf16 o when the sequence has
// one split, else the fp32 partial; warpgroup 1 (col0 0) also stores the LSE.
template <int Rows, class Frag>
__device__ __forceinline__ void store_output(const Params& p, Frag const& o, const float (&row_max)[2],
                                             const float (&row_sum)[2], int b, int head_block, int split, bool alone,
                                             int col0, int thread) {
  const int lane = thread % 32;
  CUTLASS_PRAGMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int row = fragment_row(h, thread);
    if (row >= Rows) continue;
    const int head = head_block * Rows + row;
    const float inverse = 1.0f / row_sum[h];
    const float lse2 = row_max[h] + log2f(row_sum[h]);
    if (alone) {
      __nv_bfloat16* out = p.o + b * p.o_seq + head * p.o_head + col0;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 2 * h; i < size(o); i += 4)
        *reinterpret_cast<uint32_t*>(out + fragment_column(i, lane)) = pack_bf16(o(i) * inverse, o(i + 1) * inverse);
      if (col0 == 0 && lane % 4 == 0) p.lse[b * p.lse_seq + head * p.lse_head] = lse2 * 0.6931471805599453f;
    } else {
      const int64_t at = partial_index(b, head, split, p.heads, p.splits);
      float* out = p.partial_o + at * kValues + col0;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 2 * h; i < size(o); i += 4)
        *reinterpret_cast<float2*>(out + fragment_column(i, lane)) = make_float2(o(i) * inverse, o(i + 1) * inverse);
      if (col0 == 0 && lane % 4 == 0) p.partial_lse[at] = lse2;
    }
  }
}

// The work of one CTA.
struct Work {
  int b, head_block, split;
  int first, count;  // the range's first logical page and its page count
  int length;        // seq_len
};

template <class Cfg>
__device__ __forceinline__ void producer(typename Cfg::KernelParams const& params, SharedStorage& smem, const Work& w) {
  const Params& p = params.common;
  // The head block's queries: 9 boxes of Rows x 64 columns into rows 0..Rows-1 of the Q tile.
  Tensor mQ = params.tma_q.get_tma_tensor(params.q_shape)(_, _, w.b);  // (H, 576)
  TxBarrier::arrive_and_expect_tx(&smem.q_full, Cfg::kRows * kWidth * 2);
  CUTLASS_PRAGMA_UNROLL
  for (int c = 0; c < kWidth / 64; ++c) {
    Tensor gQ = local_tile(mQ, Shape<Int<Cfg::kRows>, _64>{}, make_coord(w.head_block, c));
    Tensor sQ = make_tensor(make_smem_ptr(smem.q.data() + c * kColumnBlock), SmemLayoutBox<Cfg::kRows>{});
    auto part = tma_partition(params.tma_q, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
    copy(params.tma_q.with(smem.q_full), get<0>(part), get<1>(part));
  }

  // The pages: this CTA's rows of each (all 64 alone; 32 of a cluster of two, sent to both CTAs).
  const int rank = Cfg::kCluster > 1 ? static_cast<int>(block_rank_in_cluster()) : 0;
  const uint16_t mask = static_cast<uint16_t>((1u << Cfg::kCluster) - 1);
  Tensor mPages = params.tma_page.get_tma_tensor(params.cache_shape);  // (64, 576, NB)
  const int* table = p.block_table + w.b * p.table_seq + static_cast<int64_t>(w.first) * p.table_page;
  int page = table[0];
  Ring ring;
  for (int n = 0; n < w.count; ++n) {
    const int next = n + 1 < w.count ? table[(n + 1) * p.table_page] : 0;  // read one page ahead
    Barrier::wait(&smem.empty[ring.stage], ring.phase ^ 1);
    TxBarrier::arrive_and_expect_tx(&smem.full[ring.stage], kTileBytes);  // both halves of a cluster's page
    Tensor gPage = mPages(_, _, page);
    Element* stage = smem.pages.data() + ring.stage * kStageElements + rank * Cfg::kBoxRows * 64;
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < kWidth / 64; ++c) {
      Tensor g = local_tile(gPage, Shape<Int<Cfg::kBoxRows>, _64>{}, make_coord(rank, c));
      Tensor s = make_tensor(make_smem_ptr(stage + c * kColumnBlock), SmemLayoutBox<Cfg::kBoxRows>{});
      auto part = tma_partition(params.tma_page, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(s), group_modes<0, 2>(g));
      copy(params.tma_page.with(smem.full[ring.stage], mask, TMA::CacheHintSm90::EVICT_FIRST), get<0>(part), get<1>(part));
    }
    ring.advance();
    page = next;
  }
}

// Warpgroup 1: S, the softmax, P to warpgroup 2, and the output's columns 0..255. `thread`: 0..127.
template <class Cfg>
__device__ __forceinline__ void softmax_consumer(typename Cfg::KernelParams const& params, SharedStorage& smem,
                                                 const Work& w, int thread) {
  const Params& p = params.common;
  MmaS mma_s;
  MmaO1 mma_o;
  auto thr_s = mma_s.get_thread_slice(thread);
  auto thr_o = mma_o.get_thread_slice(thread);
  Tensor tSrS = partition_fragment_C(mma_s, Shape<Int<kBlockM>, Int<kPage>>{});
  Tensor tOrO = partition_fragment_C(mma_o, Shape<Int<kBlockM>, Int<kHalf>>{});
  // P: the bf16 A operand of P V, value for value in S's register order (the accumulator of a 64 x 16 pair
  // of n8 column blocks is the A fragment of one k16 block).
  Tensor tOrP = make_tensor<Element>(partition_shape_A(mma_o, Shape<Int<kBlockM>, Int<kPage>>{}));
  static_assert(decltype(size(tOrP))::value == decltype(size(tSrS))::value, "P and S hold the same values");
  clear(tOrO);

  const int lane = thread % 32;
  const uint32_t p_tile = cast_smem_ptr_to_uint(smem.p.data());
  const uint32_t pages_tile = cast_smem_ptr_to_uint(smem.pages.data());
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f}, factor[2] = {1.0f, 1.0f};

  // S = Q K^T of the page in `stage` (36 wgmma), and O[:, 0:256] += P V of the page in `stage` (4 wgmma).
  auto issue_s = [&](int stage) {
    Tensor sQ = make_tensor(make_smem_ptr(opaque(smem.q.data())), SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(opaque(smem.pages.data()) + stage * kStageElements), SmemLayoutPage{});
    Tensor tSrQ = thr_s.partition_fragment_A(sQ);  // descriptors: (MMA, 1, 36)
    Tensor tSrK = thr_s.partition_fragment_B(sK);
    issue_gemm<true>(mma_s, tSrQ, tSrK, tSrS);
  };
  auto issue_o = [&](int stage) {
    Tensor sVt = make_tensor(make_smem_ptr(opaque(smem.pages.data()) + stage * kStageElements), SmemLayoutVt{});
    Tensor tOrVt = thr_o.partition_fragment_B(sVt);  // (MMA, 1, 4)
    issue_gemm<false>(mma_o, tOrP, tOrVt, tOrO);
  };
  auto to_p = [&] {
    cutlass::NumericArrayConverter<Element, float, decltype(size(tSrS))::value> convert;
    using From = cutlass::Array<float, decltype(size(tSrS))::value>;
    using To = cutlass::Array<Element, decltype(size(tSrS))::value>;
    *reinterpret_cast<To*>(raw_pointer_cast(tOrP.data())) = convert(*reinterpret_cast<From const*>(raw_pointer_cast(tSrS.data())));
  };
  // Page n's P (bf16) and factors to warpgroup 2, once it is done with page n - 1's.
  auto hand_over = [&](int n) {
    Barrier::wait(&smem.p_empty, static_cast<uint32_t>((n & 1) ^ 1));
    if (lane % 4 == 0) {
      smem.rescale[fragment_row(0, thread)] = factor[0];
      smem.rescale[fragment_row(1, thread)] = factor[1];
    }
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(tSrS); i += 2) {
      const uint32_t address = p_tile + tile_offset(fragment_row(fragment_half(i), thread), fragment_column(i, lane));
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(address), "r"(pack_bf16(tSrS(i), tSrS(i + 1))) : "memory");
    }
    cutlass::arch::fence_view_async_shared();  // the generic stores, before warpgroup 2's wgmma reads them
    __syncwarp();
    if (lane == 0) Barrier::arrive(&smem.p_full);
  };

  // With 16 heads, query rows 16..63 are zero (their scores 0, finite), written before the first S.
  if constexpr (Cfg::kRows < kBlockM) {
    zero_rows(cast_smem_ptr_to_uint(smem.q.data()), Cfg::kRows, 0, kWidth, thread);
    cutlass::arch::fence_view_async_shared();
    named_sync(kBarrierFirst, 128);
  }

  // Page 0: S, the softmax, P.
  Ring ring;
  Barrier::wait(&smem.q_full, 0);
  Barrier::wait(&smem.full[0], 0);
  issue_s(0);
  warpgroup_wait<0>();
  warpgroup_fence_operand(tSrS);
  softmax_page(tSrS, valid_rows(w.first, w.length), lane, p.scale_log2, row_max, row_sum, factor);
  hand_over(0);
  to_p();

  // Pages 0 .. count - 2: S of the next page and P V of this one in flight together; the next page's
  // softmax while P V runs; the output rescaled (if at all) and the next P taken once P V is done.
  for (int n = 0; n + 1 < w.count; ++n) {
    Ring next = ring;
    next.advance();
    Barrier::wait(&smem.full[next.stage], next.phase);
    issue_s(next.stage);
    issue_o(ring.stage);
    warpgroup_wait<1>();
    warpgroup_fence_operand(tSrS);
    softmax_page(tSrS, valid_rows(w.first + n + 1, w.length), lane, p.scale_log2, row_max, row_sum, factor);
    hand_over(n + 1);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tOrO);
    warpgroup_fence_operand(tOrP);
    if (n + kStages < w.count) release_stage<Cfg::kCluster>(&smem.empty[ring.stage], lane);
    rescale_rows(tOrO, factor);
    to_p();
    ring = next;
  }
  // The last page: on a sequence's partial last page its dead rows' columns 0..255 to zero first.
  const int last_rows = valid_rows(w.first + w.count - 1, w.length);
  if (last_rows < kPage) {
    zero_rows(pages_tile + ring.stage * kTileBytes, last_rows, 0, kHalf, thread);
    cutlass::arch::fence_view_async_shared();
    named_sync(kBarrierFirst, 128);
  }
  issue_o(ring.stage);
  warpgroup_wait<0>();
  warpgroup_fence_operand(tOrO);

  // The rows' sums over the quad, shared with warpgroup 2 with the maxima; then the output.
  CUTLASS_PRAGMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
    if (lane % 4 == 0) smem.row_sum[fragment_row(h, thread)] = row_sum[h], smem.row_max[fragment_row(h, thread)] = row_max[h];
  }
  named_sync(kBarrierBoth, 256);
  const bool alone = splits_used(w.length, p.split_pages) == 1;
  store_output<Cfg::kRows>(p, tOrO, row_max, row_sum, w.b, w.head_block, w.split, alone, 0, thread);
}

// Warpgroup 2: the output's columns 256..511 from P in shared memory. `thread`: 0..127.
template <class Cfg>
__device__ __forceinline__ void second_consumer(typename Cfg::KernelParams const& params, SharedStorage& smem,
                                                const Work& w, int thread) {
  const Params& p = params.common;
  MmaO2 mma_o;
  auto thr_o = mma_o.get_thread_slice(thread);
  Tensor tOrO = partition_fragment_C(mma_o, Shape<Int<kBlockM>, Int<kHalf>>{});
  clear(tOrO);
  auto issue_o = [&](int stage) {
    Tensor sP = make_tensor(make_smem_ptr(opaque(smem.p.data())), SmemLayoutP{});
    Tensor sVt = make_tensor(make_smem_ptr(opaque(smem.pages.data()) + stage * kStageElements + kSecondHalf), SmemLayoutVt{});
    Tensor tOrP = thr_o.partition_fragment_A(sP);    // descriptors: (MMA, 1, 4)
    Tensor tOrVt = thr_o.partition_fragment_B(sVt);  // (MMA, 1, 4)
    issue_gemm<false>(mma_o, tOrP, tOrVt, tOrO);
  };

  const int lane = thread % 32;
  const uint32_t pages_tile = cast_smem_ptr_to_uint(smem.pages.data());
  const int last_rows = valid_rows(w.first + w.count - 1, w.length);
  Ring ring;
  for (int n = 0; n < w.count; ++n) {
    Barrier::wait(&smem.full[ring.stage], ring.phase);
    Barrier::wait(&smem.p_full, static_cast<uint32_t>(n & 1));
    const float factor[2] = {smem.rescale[fragment_row(0, thread)], smem.rescale[fragment_row(1, thread)]};
    rescale_rows(tOrO, factor);
    if (n + 1 == w.count && last_rows < kPage) {
      zero_rows(pages_tile + ring.stage * kTileBytes, last_rows, kHalf, kHalf, thread);
      cutlass::arch::fence_view_async_shared();
      named_sync(kBarrierSecond, 128);
    }
    issue_o(ring.stage);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tOrO);
    __syncwarp();
    if (lane == 0) Barrier::arrive(&smem.p_empty);
    if (n + kStages < w.count) release_stage<Cfg::kCluster>(&smem.empty[ring.stage], lane);
    ring.advance();
  }

  named_sync(kBarrierBoth, 256);
  float row_max[2], row_sum[2];
  CUTLASS_PRAGMA_UNROLL
  for (int h = 0; h < 2; ++h) row_max[h] = smem.row_max[fragment_row(h, thread)], row_sum[h] = smem.row_sum[fragment_row(h, thread)];
  const bool alone = splits_used(w.length, p.split_pages) == 1;
  store_output<Cfg::kRows>(p, tOrO, row_max, row_sum, w.b, w.head_block, w.split, alone, kHalf, thread);
}

// One CTA per (sequence, head block, split); a cluster of Cfg::kCluster CTAs along x shares its pages.
template <class Cfg>
__global__ void __launch_bounds__(kThreads, 1) attend(const __grid_constant__ typename Cfg::KernelParams params) {
  extern __shared__ unsigned char shared[];
  auto& smem = *reinterpret_cast<SharedStorage*>((reinterpret_cast<uintptr_t>(shared) + 1023) & ~uintptr_t{1023});
  const Params& p = params.common;
  Work w;
  w.head_block = static_cast<int>(blockIdx.x) % p.head_blocks;
  w.b = static_cast<int>(blockIdx.x) / p.head_blocks;
  w.split = static_cast<int>(blockIdx.y);
  w.length = p.seq_lens[w.b * p.seq_lens_stride];
  w.first = w.split * p.split_pages;
  const int pages = pages_of(w.length);
  // A short sequence uses fewer splits. Every CTA of a cluster has the same sequence and split, so the
  // cluster leaves whole.
  if (w.first >= pages) return;
  w.count = min(p.split_pages, pages - w.first);

  if (threadIdx.x == 0) {
    TxBarrier::init(&smem.q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      TxBarrier::init(&smem.full[s], 1);
      Barrier::init(&smem.empty[s], kConsumerWarps * Cfg::kCluster);
    }
    Barrier::init(&smem.p_full, 4);   // the warps of warpgroup 1
    Barrier::init(&smem.p_empty, 4);  // the warps of warpgroup 2
    cutlass::arch::fence_barrier_init();
  }
  // The barriers are initialized in every CTA of the cluster before any copy or arrival reaches them.
  if constexpr (Cfg::kCluster > 1) {
    cute::cluster_arrive_relaxed();
    cute::cluster_wait();
  } else {
    __syncthreads();
  }

  if (threadIdx.x < 128) {
    cutlass::arch::warpgroup_reg_dealloc<kProducerRegisters>();
    if (threadIdx.x == 0) producer<Cfg>(params, smem, w);
  } else {
    cutlass::arch::warpgroup_reg_alloc<kConsumerRegisters>();
    if (threadIdx.x < 256)
      softmax_consumer<Cfg>(params, smem, w, static_cast<int>(threadIdx.x) - 128);
    else
      second_consumer<Cfg>(params, smem, w, static_cast<int>(threadIdx.x) - 256);
  }
  // No CTA of a cluster leaves while the other may still write its shared memory (the barrier orders no
  // data: relaxed).
  if constexpr (Cfg::kCluster > 1) {
    __syncwarp();
    cute::cluster_arrive_relaxed();
    cute::cluster_wait();
  }
}

}  // namespace mla
