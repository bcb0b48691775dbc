// One CTA's work in the Hopper style: attn/prefill_causal_gqa's tile loop (its hopper_tile.cuh, whose design
// follows FlashAttention-3's paper) made to walk the sliding window's band, for head dims 128 and 64. A tile
// of BM = 128 query rows of one head against the key tiles the band reaches (band.cuh), from the diagonal
// down, in three warpgroups:
// - Warpgroup 0, the producer: one thread issues TMA copies (Q once; K and V tiles through two rings, K one
//   tile ahead of V) over the query tile's whole key range, and gives its registers to the consumers.
// - Warpgroups 1 and 2, the consumers: 64 query rows each. Each computes only the key tiles its own rows
//   see and passes over the others (waits for them to land, releases them): with BN < BM a warpgroup's rows
//   see one tile fewer than the query tile's. S = Q K^T is a wgmma with both operands in shared memory; the
//   online softmax works on its fp32 accumulator in registers; P, packed to bf16 in the same registers'
//   order, is the register A operand of O += P V, a wgmma that reads V from shared memory as an MN-major B
//   operand (V's tile transposed by the layout, not by a copy).
// - Head dim 128 (BN = 128, two stages per ring, one CTA per SM: the causal kernel's shape): within a
//   consumer, the softmax of tile n overlaps the P V product of tile n + 1. S_n = Q K_n^T and O += P_{n+1}
//   V_{n+1} are issued back to back, the first is waited for alone, the softmax runs while the second is
//   still in the tensor cores, and only the rescale of O waits for it.
// - Head dim 64 (BN = 64, four stages, 80 KB of shared memory, two CTAs per SM): a narrow window's band is
//   3 tiles of 64 per warpgroup rather than 2 of 128 (a third fewer keys computed), all of a gpt-oss band's
//   tiles are in flight at once, and the SM holds two CTAs so that one's prologue (Q's load) and epilogue
//   overlap the other's products. Two CTAs leave 104 registers per consumer thread, too few for S, P and O
//   at once: each tile's S, softmax and P V run in turn, and the other CTA fills the tensor cores meanwhile.
// - The band mask (key > query or key < query - W) only on a warpgroup's edge tiles: its first (the
//   diagonal) and the lowest ones its window's left edge cuts; the tiles between take no compare.
//
// Rows of a tile past its sequence's end are the next sequence's tokens, or TMA's zero fill past the
// tensor's last token: finite values in either case. The mask hides every key after a row, so a key past the
// sequence's end gets a probability of exactly 0 in every row that is stored, and only rows inside the
// sequence are stored. No tile starts before the sequence (band.cuh clamps at key 0).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/bfloat16.h>
#include <cutlass/numeric_conversion.h>

#include <cstdint>

#include "band.cuh"
#include "schedule.cuh"

namespace sliding {

using namespace cute;

constexpr int kBlockM = 128;    // query rows per CTA, for both head dims (the schedule's tiles)
constexpr int kConsumers = 2;   // warpgroups of 64 query rows
constexpr int kWarpgroupRows = kBlockM / kConsumers;
constexpr int kThreads = 128 * (kConsumers + 1);

using Element = cutlass::bfloat16_t;

// The tile sizes and budgets of one head dim.
template <int HeadDim>
struct Config;
template <>
struct Config<128> {
  static constexpr int kBlockN = 128;
  static constexpr int kStages = 2;
  static constexpr int kMinBlocks = 1;  // 160 KB of shared memory
  static constexpr int kProducerRegisters = 24, kConsumerRegisters = 240;  // 24 x 128 + 240 x 256 <= 65536
  static constexpr bool kOverlap = true;  // S_n with P_{n+1} V_{n+1}: S, P and O live at once (about 200)
};
template <>
struct Config<64> {
  static constexpr int kBlockN = 64;
  static constexpr int kStages = 4;
  static constexpr int kMinBlocks = 2;  // 80 KB of shared memory each
  // Two CTAs: 80 registers per thread at launch (65536 / 768, rounded down to 8); the producer's 56 x 128
  // given back make 24 x 128 + 104 x 256 <= 80 x 384.
  static constexpr int kProducerRegisters = 24, kConsumerRegisters = 104;
  // S (32), P (16) and O (32 fp32) live at once do not fit 104 with the addresses and the loop's state (ptxas
  // spills and serializes the wgmma): each tile's S, softmax and P V run in turn, and the other CTA on the
  // SM fills the tensor cores during this one's softmax.
  static constexpr bool kOverlap = false;
};

// The layouts, operations and copies that follow from the head dim.
template <int HeadDim>
struct Traits {
  static_assert(HeadDim == 128 || HeadDim == 64, "head dims 128 and 64");
  using C = Config<HeadDim>;
  static constexpr int kBlockN = C::kBlockN;
  static constexpr int kStages = C::kStages;

  // Shared-memory tiles in the 128-byte swizzle wgmma and TMA share: (rows, head dim), head dim contiguous.
  // The swizzle atom is 8 rows of 64 bf16: D 128 is two atoms wide, D 64 one.
  using SmemLayoutQ =
      decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<kBlockM>, Int<HeadDim>>{}));
  using SmemLayoutKV =
      decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<kBlockN>, Int<HeadDim>, Int<kStages>>{}));
  // V^T as (head dim, key, stage): the same bytes as SmemLayoutKV, head dim fastest, the MN-major B operand.
  using SmemLayoutVt = decltype(composition(
      SmemLayoutKV{}, make_ordered_layout(Shape<Int<HeadDim>, Int<kBlockN>, Int<kStages>>{}, Step<_2, _1, _3>{})));

  // S = Q K^T: (BM, BN, D), both operands K-major in shared memory, one 64-row atom per consumer warpgroup.
  using MmaQK = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBlockM>, Int<kBlockN>, Int<HeadDim>>>(),
      Layout<Shape<Int<kConsumers>, _1, _1>>{}));
  // O += P V: (BM, D, BN), P from registers, V^T MN-major in shared memory.
  using MmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<Int<kBlockM>, Int<HeadDim>, Int<kBlockN>>, GMMA::Major::K,
                           GMMA::Major::MN>(),
      Layout<Shape<Int<kConsumers>, _1, _1>>{}));

  // A [T, H, D] tensor as TMA sees it: (token, head dim, head), the head dim contiguous.
  using GmemShape = Shape<int32_t, int32_t, int32_t>;
  using GmemStride = Stride<int64_t, _1, int64_t>;
  using GmemTensor =
      decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), GmemShape{}, GmemStride{}));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutQ{},
                                      Shape<Int<kBlockM>, Int<HeadDim>>{}, _1{}));
  using TmaKV = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, take<0, 2>(SmemLayoutKV{}),
                                       Shape<Int<kBlockN>, Int<HeadDim>>{}, _1{}));

  static constexpr uint32_t kQBytes = kBlockM * HeadDim * sizeof(Element);
  static constexpr uint32_t kTileBytes = kBlockN * HeadDim * sizeof(Element);

  struct SharedStorage {
    array_aligned<Element, cosize_v<SmemLayoutQ>, 1024> q;
    array_aligned<Element, cosize_v<SmemLayoutKV>, 1024> k;
    array_aligned<Element, cosize_v<SmemLayoutKV>, 1024> v;
    uint64_t q_full;
    uint64_t k_full[kStages], k_empty[kStages];
    uint64_t v_full[kStages], v_empty[kStages];
  };
  // Dynamic shared memory is aligned here to the 1024 bytes of a swizzle atom.
  static constexpr int kSharedBytes = static_cast<int>(sizeof(SharedStorage)) + 1024;
  static_assert(kSharedBytes * C::kMinBlocks <= 228 * 1024 - C::kMinBlocks * 1024, "shared memory per SM");

  // The host builds the TMA descriptors of q, k and v for these layouts.
  static TmaQ make_tma_q(GmemTensor const& q) {
    return make_tma_copy(SM90_TMA_LOAD{}, q, SmemLayoutQ{}, Shape<Int<kBlockM>, Int<HeadDim>>{}, _1{});
  }
  static TmaKV make_tma_kv(GmemTensor const& kv) {
    return make_tma_copy(SM90_TMA_LOAD{}, kv, take<0, 2>(SmemLayoutKV{}), Shape<Int<kBlockN>, Int<HeadDim>>{}, _1{});
  }
};

template <int HeadDim>
struct Params {
  using T = Traits<HeadDim>;
  typename T::TmaQ tma_q;
  typename T::TmaKV tma_k, tma_v;
  typename T::GmemShape q_shape, kv_shape;  // (T, D, Hq) and (T, D, Hkv)
  Element* o;
  float* lse;
  const int* cu_seqlens;
  int64_t o_token, o_head;  // strides in elements (the head dim is contiguous)
  int64_t lse_head, lse_token;
  int heads, group;  // Hq and Hq / Hkv
  int window;        // W, clamped to T by the host
  float scale_log2;  // softmax_scale * log2(e): scores in base 2
};

// A ring of shared-memory stages: which one is next and the parity of its barriers' current phase.
template <int Stages>
struct Ring {
  int stage = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == Stages) stage = 0, phase ^= 1;
  }
};

using Barrier = cutlass::arch::ClusterBarrier;
using TxBarrier = cutlass::arch::ClusterTransactionBarrier;

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Issues one wgmma batch (every K block of the operands) and commits it; the caller waits.
template <bool ZeroInit, class Mma, class A, class B, class Acc>
__device__ __forceinline__ void issue_gemm(Mma& mma, A& a, B const& b, Acc& c) {
  constexpr bool kRegisterA = !is_base_of<GMMA::DescriptorIterator, typename Mma::FrgTypeA>::value;
  if constexpr (kRegisterA) warpgroup_fence_operand(a);
  warpgroup_fence_operand(c);
  warpgroup_arrive();
  if constexpr (ZeroInit) mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTLASS_PRAGMA_UNROLL
  for (int kb = 0; kb < size<2>(a); ++kb) {
    cute::gemm(mma, a(_, _, kb), b(_, _, kb), c);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
}

// The accumulator fragment of a 64 x N wgmma, per thread: value i is row (lane / 4) + 8 ((i / 2) % 2) of the
// warp's 16 and column 8 (i / 4) + 2 (lane % 4) + i % 2.
__device__ __forceinline__ int fragment_half(int i) { return (i / 2) % 2; }
__device__ __forceinline__ int fragment_column(int i, int lane) { return 8 * (i / 4) + 2 * (lane % 4) + i % 2; }

// The band mask on an edge tile: -inf where key > query or key < query - W. `query0`: the thread's first row
// (its second is 8 further); `key0`: the tile's first key.
template <class Frag>
__device__ __forceinline__ void mask_band(Frag& s, int query0, int key0, int window, int lane) {
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(s); ++i)
    if (hidden(query0 + 8 * fragment_half(i), key0 + fragment_column(i, lane), window)) s(i) = -INFINITY;
}

// The online softmax of one key tile on S (in place: S becomes 2^(scale_log2 s - max)); returns through
// `rescale` the factor by which the rows' earlier output must be multiplied. A row whose keys in this tile
// are all hidden (its window's left edge passed them) keeps its maximum: rescale 2^0 = 1, p = 2^-inf = 0.
// Its maximum is finite by then (a warpgroup's first tile holds each row's own key), but a row with no
// finite score yet would subtract 0, not -inf, so that nothing computes -inf - (-inf).
template <class Frag>
__device__ __forceinline__ void softmax_tile(Frag& s, float (&row_max)[2], float (&row_sum)[2], float (&rescale)[2],
                                             float scale_log2) {
  float tile_max[2] = {-INFINITY, -INFINITY};
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(s); ++i) tile_max[fragment_half(i)] = fmaxf(tile_max[fragment_half(i)], s(i));
  float shift[2];
  CUTLASS_PRAGMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
    tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
    const float new_max = fmaxf(row_max[h], tile_max[h] * scale_log2);
    const float base = new_max == -INFINITY ? 0.f : new_max;
    rescale[h] = exp2_approx(row_max[h] - base);  // the first tile: 2^-inf = 0 against a zero output and sum
    row_max[h] = new_max;
    shift[h] = -base;
    row_sum[h] *= rescale[h];
  }
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(s); ++i) {
    const int h = fragment_half(i);
    s(i) = exp2_approx(fmaf(s(i), scale_log2, shift[h]));
    row_sum[h] += s(i);
  }
}

// The key tiles of one CTA: the producer loads [first, last] from `last` down; the consumers take them in
// that order.
struct KeyRange {
  int first, last;
};

// One consumer warpgroup's share of a CTA's key tiles: the tiles its rows see, [low, high] inside the CTA's
// range (empty, high < low, when all its rows are past the sequence's end), and where its masks apply:
// tiles >= diagonal and tiles < edge_end (band.cuh). `query0`: the calling thread's first row.
struct RowsBand {
  int low, high, diagonal, edge_end, query0;
};

template <int HeadDim>
__device__ __forceinline__ void producer(const Params<HeadDim>& p, typename Traits<HeadDim>::SharedStorage& smem,
                                         const TileWork& work, int head, int seq_start, KeyRange range) {
  using T = Traits<HeadDim>;
  constexpr int kBlockN = T::kBlockN;
  const int kv_head = head / p.group;
  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename T::SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename T::SmemLayoutKV{});
  Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename T::SmemLayoutKV{});
  // Coordinates of this sequence's tokens: tile n starts at token seq_start + n BN (TMA takes any start).
  Tensor mQ = domain_offset(make_coord(seq_start, _0{}), p.tma_q.get_tma_tensor(p.q_shape)(_, _, head));
  Tensor mK = domain_offset(make_coord(seq_start, _0{}), p.tma_k.get_tma_tensor(p.kv_shape)(_, _, kv_head));
  Tensor mV = domain_offset(make_coord(seq_start, _0{}), p.tma_v.get_tma_tensor(p.kv_shape)(_, _, kv_head));
  Tensor gQ = local_tile(mQ, Shape<Int<kBlockM>, Int<HeadDim>>{}, make_coord(work.q_tile, _0{}));
  Tensor gK = local_tile(mK, Shape<Int<kBlockN>, Int<HeadDim>>{}, make_coord(_, _0{}));  // (BN, D, n)
  Tensor gV = local_tile(mV, Shape<Int<kBlockN>, Int<HeadDim>>{}, make_coord(_, _0{}));
  // Each partition: (TMA, tiles) of global memory and (TMA, stages) of shared memory.
  auto tma_q = tma_partition(p.tma_q, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
  auto& tQgQ = get<0>(tma_q);
  auto& tQsQ = get<1>(tma_q);
  auto tma_k = tma_partition(p.tma_k, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
  auto& tKgK = get<0>(tma_k);
  auto& tKsK = get<1>(tma_k);
  auto tma_v = tma_partition(p.tma_v, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));
  auto& tVgV = get<0>(tma_v);
  auto& tVsV = get<1>(tma_v);

  TxBarrier::arrive_and_expect_tx(&smem.q_full, T::kQBytes);
  copy(p.tma_q.with(smem.q_full), tQgQ, tQsQ);

  Ring<T::kStages> k_ring, v_ring;
  auto load_k = [&](int n) {
    Barrier::wait(&smem.k_empty[k_ring.stage], k_ring.phase ^ 1);
    TxBarrier::arrive_and_expect_tx(&smem.k_full[k_ring.stage], T::kTileBytes);
    copy(p.tma_k.with(smem.k_full[k_ring.stage]), tKgK(_, n), tKsK(_, k_ring.stage));
    k_ring.advance();
  };
  auto load_v = [&](int n) {
    Barrier::wait(&smem.v_empty[v_ring.stage], v_ring.phase ^ 1);
    TxBarrier::arrive_and_expect_tx(&smem.v_full[v_ring.stage], T::kTileBytes);
    copy(p.tma_v.with(smem.v_full[v_ring.stage]), tVgV(_, n), tVsV(_, v_ring.stage));
    v_ring.advance();
  };
  // The consumers' order: K of the top tile, then K of tile n - 1 before V of tile n, V of the lowest last.
  load_k(range.last);
  for (int n = range.last; n > range.first; --n) {
    load_k(n - 1);
    load_v(n);
  }
  load_v(range.first);
}

// P, the bf16 A operand of P V, from S (fp32, the same register order).
template <class FragS, class FragP>
__device__ __forceinline__ void convert_p(FragS const& s, FragP& p) {
  constexpr int kSize = decltype(size(s))::value;
  cutlass::NumericArrayConverter<Element, float, kSize> convert;
  *reinterpret_cast<cutlass::Array<Element, kSize>*>(raw_pointer_cast(p.data())) =
      convert(*reinterpret_cast<cutlass::Array<float, kSize> const*>(raw_pointer_cast(s.data())));
}

template <class FragO>
__device__ __forceinline__ void rescale_o(FragO& o, float const (&rescale)[2]) {
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(o); ++i) o(i) *= rescale[fragment_half(i)];
}

// One consumer warpgroup's key tiles (its RowsBand). Tiles its rows do not see are passed over: waited for
// (so that the barriers' phases stay in step with the producer's) and released at once.
//
// Overlapped (D 128): tile n's S, product and softmax overlap P_{n+1} V_{n+1}. Two rings' positions: V lags
// K by one tile.
template <int HeadDim, class Storage, class MmaQK, class MmaPV, class TQ, class TK, class TV, class TS, class TP, class TO>
__device__ __forceinline__ void overlapped_tiles(Storage& smem, MmaQK& mma_qk, MmaPV& mma_pv, TQ const& tSrQ,
                                                 TK const& tSrK, TV const& tOrVt, TS& tSrS, TP& tOrP, TO& tOrO,
                                                 float (&row_max)[2], float (&row_sum)[2], KeyRange range,
                                                 RowsBand band, int window, float scale_log2, bool signals) {
  using T = Traits<HeadDim>;
  constexpr int kBlockN = T::kBlockN;
  const int lane = threadIdx.x % 32;
  const int low = band.low, high = band.high, diagonal = band.diagonal, edge_end = band.edge_end, query0 = band.query0;
  float rescale[2];
  Ring<T::kStages> k_ring, v_ring;
  // K and V of one tile, in the producer's order (K of the tile below is sent before V of this one).
  auto pass = [&](int count) {
    for (int i = 0; i < count; ++i) {
      Barrier::wait(&smem.k_full[k_ring.stage], k_ring.phase);
      if (signals) Barrier::arrive(&smem.k_empty[k_ring.stage]);
      k_ring.advance();
      Barrier::wait(&smem.v_full[v_ring.stage], v_ring.phase);
      if (signals) Barrier::arrive(&smem.v_empty[v_ring.stage]);
      v_ring.advance();
    }
  };
  // O += P V for the tile whose P was made last; its V is the next in the ring.
  auto accumulate_pv = [&] {
    Barrier::wait(&smem.v_full[v_ring.stage], v_ring.phase);
    issue_gemm<false>(mma_pv, tOrP, tOrVt(_, _, _, v_ring.stage), tOrO);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tOrO);
    if (signals) Barrier::arrive(&smem.v_empty[v_ring.stage]);
    v_ring.advance();
  };
  auto step = [&](int n, auto masked) {
    Barrier::wait(&smem.k_full[k_ring.stage], k_ring.phase);
    issue_gemm<true>(mma_qk, tSrQ, tSrK(_, _, _, k_ring.stage), tSrS);
    Barrier::wait(&smem.v_full[v_ring.stage], v_ring.phase);
    issue_gemm<false>(mma_pv, tOrP, tOrVt(_, _, _, v_ring.stage), tOrO);
    warpgroup_wait<1>();  // S_n is done; P V may still run
    warpgroup_fence_operand(tSrS);
    if (signals) Barrier::arrive(&smem.k_empty[k_ring.stage]);
    k_ring.advance();
    if constexpr (decltype(masked)::value) mask_band(tSrS, query0, n * kBlockN, window, lane);
    softmax_tile(tSrS, row_max, row_sum, rescale, scale_log2);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tOrO);
    warpgroup_fence_operand(tOrP);
    if (signals) Barrier::arrive(&smem.v_empty[v_ring.stage]);
    v_ring.advance();
    rescale_o(tOrO, rescale);
    convert_p(tSrS, tOrP);
  };

  // Tiles above this warpgroup's last row. Both K and V of each: passing all the K first would wait for a
  // K the producer sends only after a V whose stage this warpgroup has not released.
  pass(range.last - high);
  if (high >= low) {
    Barrier::wait(&smem.q_full, 0);
    // The warpgroup's top tile, which holds each of its rows' own key: S, the band mask, the softmax.
    Barrier::wait(&smem.k_full[k_ring.stage], k_ring.phase);
    issue_gemm<true>(mma_qk, tSrQ, tSrK(_, _, _, k_ring.stage), tSrS);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tSrS);
    if (signals) Barrier::arrive(&smem.k_empty[k_ring.stage]);
    k_ring.advance();
    mask_band(tSrS, query0, high * kBlockN, window, lane);
    softmax_tile(tSrS, row_max, row_sum, rescale, scale_log2);
    convert_p(tSrS, tOrP);
    int n = high - 1;
    for (; n >= low && n >= diagonal; --n) step(n, true_type{});   // more of the diagonal (BN < 64 only)
    for (; n >= low && n >= edge_end; --n) step(n, false_type{});  // inside the band: no compare
    for (; n >= low; --n) step(n, true_type{});                     // the window's left edge
    accumulate_pv();                                                // the lowest tile's
  }
  pass(low - range.first);  // tiles below this warpgroup's first row's window
}

// In turn (D 64, whose registers hold S or P and O but not both S and P besides O): S_n, its softmax, O
// rescaled, P_n V_n. K and V of a tile are taken together, so one ring position serves both.
template <int HeadDim, class Storage, class MmaQK, class MmaPV, class TQ, class TK, class TV, class TS, class TP, class TO>
__device__ __forceinline__ void serial_tiles(Storage& smem, MmaQK& mma_qk, MmaPV& mma_pv, TQ const& tSrQ,
                                             TK const& tSrK, TV const& tOrVt, TS& tSrS, TP& tOrP, TO& tOrO,
                                             float (&row_max)[2], float (&row_sum)[2], KeyRange range, RowsBand band,
                                             int window, float scale_log2, bool signals) {
  using T = Traits<HeadDim>;
  constexpr int kBlockN = T::kBlockN;
  const int lane = threadIdx.x % 32;
  const int low = band.low, high = band.high, diagonal = band.diagonal, edge_end = band.edge_end, query0 = band.query0;
  Ring<T::kStages> ring;
  auto pass = [&](int count) {
    for (int i = 0; i < count; ++i) {
      Barrier::wait(&smem.k_full[ring.stage], ring.phase);
      if (signals) Barrier::arrive(&smem.k_empty[ring.stage]);
      Barrier::wait(&smem.v_full[ring.stage], ring.phase);
      if (signals) Barrier::arrive(&smem.v_empty[ring.stage]);
      ring.advance();
    }
  };
  auto step = [&](int n, bool masked) {
    float rescale[2];
    Barrier::wait(&smem.k_full[ring.stage], ring.phase);
    issue_gemm<true>(mma_qk, tSrQ, tSrK(_, _, _, ring.stage), tSrS);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tSrS);
    if (signals) Barrier::arrive(&smem.k_empty[ring.stage]);
    if (masked) mask_band(tSrS, query0, n * kBlockN, window, lane);
    softmax_tile(tSrS, row_max, row_sum, rescale, scale_log2);
    rescale_o(tOrO, rescale);
    convert_p(tSrS, tOrP);
    Barrier::wait(&smem.v_full[ring.stage], ring.phase);
    issue_gemm<false>(mma_pv, tOrP, tOrVt(_, _, _, ring.stage), tOrO);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tOrO);
    if (signals) Barrier::arrive(&smem.v_empty[ring.stage]);
    ring.advance();
  };

  pass(range.last - high);  // tiles above this warpgroup's last row
  if (high >= low) {
    Barrier::wait(&smem.q_full, 0);
    // From the top tile (each row's own key: the diagonal) down; the band mask on the edge tiles only.
    for (int n = high; n >= low; --n) step(n, n == high || n >= diagonal || n < edge_end);
  }
  pass(low - range.first);  // tiles below this warpgroup's first row's window
}

// `thread`: 0..255 over the two consumer warpgroups.
template <int HeadDim>
__device__ __forceinline__ void consumer(const Params<HeadDim>& p, typename Traits<HeadDim>::SharedStorage& smem,
                                         const TileWork& work, int head, int seq_start, int length, KeyRange range,
                                         int thread) {
  using T = Traits<HeadDim>;
  constexpr int kBlockN = T::kBlockN;
  typename T::MmaQK mma_qk;
  typename T::MmaPV mma_pv;
  auto thr_qk = mma_qk.get_thread_slice(thread);
  auto thr_pv = mma_pv.get_thread_slice(thread);
  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename T::SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename T::SmemLayoutKV{});
  Tensor sVt = make_tensor(make_smem_ptr(smem.v.data()), typename T::SmemLayoutVt{});
  Tensor tSrQ = thr_qk.partition_fragment_A(sQ);    // descriptors of this warpgroup's 64 rows
  Tensor tSrK = thr_qk.partition_fragment_B(sK);    // (MMA, 1, K blocks, stage)
  Tensor tOrVt = thr_pv.partition_fragment_B(sVt);  // (MMA, 1, K blocks, stage)
  Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kBlockN>>{});
  Tensor tOrO = partition_fragment_C(mma_pv, Shape<Int<kBlockM>, Int<HeadDim>>{});
  // P: the bf16 A operand of P V, value for value in S's register order (the accumulator of a 64 x 16 pair
  // of n8 column blocks is the A fragment of one k16 block).
  Tensor tOrP = make_tensor<Element>(partition_shape_A(mma_pv, Shape<Int<kBlockM>, Int<kBlockN>>{}));
  static_assert(decltype(size(tOrP))::value == decltype(size(tSrS))::value, "P and S hold the same values");
  clear(tOrO);

  const int lane = thread % 32;
  const int first_row = work.q_tile * kBlockM + (thread / 128) * kWarpgroupRows;  // this warpgroup's rows
  const int query0 = first_row + (thread % 128) / 32 * 16 + lane / 4;  // this thread's: query0, query0 + 8
  const bool signals = thread % 128 == 0;  // one arrival per warpgroup on the empty barriers
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};

  const bool has_rows = first_row < length;
  const RowsBand band{has_rows ? rows_first_tile(first_row, p.window, kBlockN) : range.first,
                      has_rows ? rows_last_tile(first_row, kWarpgroupRows, length, kBlockN) : range.first - 1,
                      diagonal_tile(first_row, kBlockN), edge_end_tile(first_row, kWarpgroupRows, p.window, kBlockN),
                      query0};
  if constexpr (T::C::kOverlap)
    overlapped_tiles<HeadDim>(smem, mma_qk, mma_pv, tSrQ, tSrK, tOrVt, tSrS, tOrP, tOrO, row_max, row_sum, range, band,
                              p.window, p.scale_log2, signals);
  else
    serial_tiles<HeadDim>(smem, mma_qk, mma_pv, tSrQ, tSrK, tOrVt, tSrS, tOrP, tOrO, row_max, row_sum, range, band,
                          p.window, p.scale_log2, signals);
  if (!has_rows) return;

  // Normalize once, round once, store the rows inside the sequence, and the LSE (natural log).
  float inverse[2], lse[2];
  CUTLASS_PRAGMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
    inverse[h] = 1.f / row_sum[h];
    lse[h] = (row_max[h] + __log2f(row_sum[h])) * 0.6931471805599453f;
  }
  CUTLASS_PRAGMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int query = query0 + 8 * h;
    if (query >= length) continue;
    const int64_t token = seq_start + query;
    Element* out = p.o + token * p.o_token + head * p.o_head;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 2 * h; i < size(tOrO); i += 4) {  // values i, i + 1 of this half: two adjacent columns
      __nv_bfloat162 pair = __floats2bfloat162_rn(tOrO(i) * inverse[h], tOrO(i + 1) * inverse[h]);
      *reinterpret_cast<__nv_bfloat162*>(out + fragment_column(i, lane)) = pair;
    }
    if (lane % 4 == 0) p.lse[head * p.lse_head + token * p.lse_token] = lse[h];
  }
}

}  // namespace sliding
