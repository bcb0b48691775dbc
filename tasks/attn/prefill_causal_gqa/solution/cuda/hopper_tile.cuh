// One CTA's work in the Hopper style (FlashAttention-3's design, written from its paper and our own reading
// of the PTX ISA): a tile of BM = 128 query rows of one head against the sequence's key tiles of BN = 128,
// last (diagonal) tile first, in three warpgroups.
// - Warpgroup 0, the producer: one thread issues TMA copies (Q once; K and V tiles through two rings of
//   two stages each, K running one tile ahead of V) and gives its registers to the consumers.
// - Warpgroups 1 and 2, the consumers: 64 query rows each. S = Q K^T is a wgmma with both operands in
//   shared memory; the online softmax works on its fp32 accumulator in registers; P, packed to bf16 in the
//   same registers' order, is the register A operand of O += P V, a wgmma that reads V from shared memory
//   as an MN-major B operand (V's tile transposed by the descriptor, not by a copy).
// - Within a consumer, the softmax of tile n overlaps the P V product of tile n + 1: S_n = Q K_n^T and
//   O += P_{n+1} V_{n+1} are issued back to back, the first is waited for alone, the softmax runs while the
//   second is still in the tensor cores, and only the rescale of O waits for it.
//
// Rows of a tile past its sequence's end are the next sequence's tokens, or TMA's zero fill past the
// tensor's last token: finite values in either case. The causal mask hides every key after a row's own
// position, so a key past the sequence's end gets a probability of exactly 0 in every row that is stored,
// and only rows inside the sequence are stored.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/bfloat16.h>
#include <cutlass/numeric_conversion.h>

#include <cstdint>

#include "schedule.cuh"

namespace prefill {

using namespace cute;

constexpr int kHeadDim = 128;
constexpr int kBlockM = 128;  // query rows per CTA
constexpr int kBlockN = 128;  // keys per tile
constexpr int kStages = 2;    // tiles of K (and of V) in shared memory
constexpr int kConsumers = 2;  // warpgroups of 64 query rows
constexpr int kThreads = 128 * (kConsumers + 1);
constexpr int kProducerRegisters = 24, kConsumerRegisters = 240;  // 24 x 128 + 240 x 256 <= 65536

using Element = cutlass::bfloat16_t;

// Shared-memory tiles in the 128-byte swizzle wgmma and TMA share: (rows, head dim), head dim contiguous.
using SmemLayoutQ = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}));
using SmemLayoutKV =
    decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<kBlockN>, Int<kHeadDim>, Int<kStages>>{}));
// V^T as (head dim, key, stage): the same bytes as SmemLayoutKV, head dim fastest, the MN-major B operand of P V.
using SmemLayoutVt = decltype(composition(
    SmemLayoutKV{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockN>, Int<kStages>>{}, Step<_2, _1, _3>{})));

// S = Q K^T: (BM, BN, D), both operands K-major in shared memory, one 64-row atom per consumer warpgroup.
using MmaQK = decltype(make_tiled_mma(
    GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBlockM>, Int<kBlockN>, Int<kHeadDim>>>(),
    Layout<Shape<Int<kConsumers>, _1, _1>>{}));
// O += P V: (BM, D, BN), P from registers, V^T MN-major in shared memory.
using MmaPV = decltype(make_tiled_mma(
    GMMA::rs_op_selector<Element, Element, float, Shape<Int<kBlockM>, Int<kHeadDim>, Int<kBlockN>>, GMMA::Major::K,
                         GMMA::Major::MN>(),
    Layout<Shape<Int<kConsumers>, _1, _1>>{}));

// A [T, H, D] tensor as TMA sees it: (token, head dim, head), the head dim contiguous.
using GmemShape = Shape<int32_t, int32_t, int32_t>;
using GmemStride = Stride<int64_t, _1, int64_t>;
using GmemTensor =
    decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), GmemShape{}, GmemStride{}));
using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutQ{},
                                    Shape<Int<kBlockM>, Int<kHeadDim>>{}, _1{}));
using TmaKV = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, take<0, 2>(SmemLayoutKV{}),
                                     Shape<Int<kBlockN>, Int<kHeadDim>>{}, _1{}));

constexpr uint32_t kQBytes = kBlockM * kHeadDim * sizeof(Element);
constexpr uint32_t kTileBytes = kBlockN * kHeadDim * sizeof(Element);

struct SharedStorage {
  array_aligned<Element, cosize_v<SmemLayoutQ>, 1024> q;
  array_aligned<Element, cosize_v<SmemLayoutKV>, 1024> k;
  array_aligned<Element, cosize_v<SmemLayoutKV>, 1024> v;
  uint64_t q_full, q_empty;  // Q's tile: loaded / free for the next work item
  uint64_t k_full[kStages], k_empty[kStages];
  uint64_t v_full[kStages], v_empty[kStages];
};
// Dynamic shared memory is aligned here to the 1024 bytes of a swizzle atom.
constexpr int kSharedBytes = static_cast<int>(sizeof(SharedStorage)) + 1024;

struct Params {
  TmaQ tma_q;
  TmaKV tma_k, tma_v;
  GmemShape q_shape, kv_shape;  // (T, D, Hq) and (T, D, Hkv)
  Element* o;
  float* lse;
  const int* cu_seqlens;
  int64_t o_token, o_head;  // strides in elements (the head dim is contiguous)
  int64_t lse_head, lse_token;
  int heads, group;  // Hq and Hq / Hkv
  float scale_log2;  // softmax_scale * log2(e): scores in base 2
};

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

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Issues one wgmma batch (every K block of the operands) and commits it; the caller waits.
template <bool ZeroInit, class Mma, class A, class B, class C>
__device__ __forceinline__ void issue_gemm(Mma& mma, A& a, B const& b, C& c) {
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

// The online softmax of one key tile on S (in place: S becomes 2^(scale_log2 s - max)); returns through
// `rescale` the factor by which the rows' earlier output must be multiplied.
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
    // No row is ever wholly masked (its own key is visible), so new_max is finite; the first tile's
    // rescale is 2^-inf = 0 against a zero output and sum.
    rescale[h] = exp2_approx(row_max[h] - new_max);
    row_max[h] = new_max;
    shift[h] = -new_max;
    row_sum[h] *= rescale[h];
  }
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(s); ++i) {
    const int h = fragment_half(i);
    s(i) = exp2_approx(fmaf(s(i), scale_log2, shift[h]));
    row_sum[h] += s(i);
  }
}

// One work item (query tile, head) of the producer; `item` counts this CTA's items (Q's barrier phase), the
// rings carry on from the item before.
__device__ __forceinline__ void producer(const Params& p, SharedStorage& smem, const TileWork& work, int head,
                                         int seq_start, int key_tiles, int item, Ring& k_ring, Ring& v_ring) {
  const int kv_head = head / p.group;
  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), SmemLayoutKV{});
  Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), SmemLayoutKV{});
  // Coordinates of this sequence's tokens: tile n starts at token seq_start + n BN (TMA takes any start).
  Tensor mQ = domain_offset(make_coord(seq_start, _0{}), p.tma_q.get_tma_tensor(p.q_shape)(_, _, head));
  Tensor mK = domain_offset(make_coord(seq_start, _0{}), p.tma_k.get_tma_tensor(p.kv_shape)(_, _, kv_head));
  Tensor mV = domain_offset(make_coord(seq_start, _0{}), p.tma_v.get_tma_tensor(p.kv_shape)(_, _, kv_head));
  Tensor gQ = local_tile(mQ, Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_coord(work.q_tile, _0{}));
  Tensor gK = local_tile(mK, Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_coord(_, _0{}));  // (BN, D, n)
  Tensor gV = local_tile(mV, Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_coord(_, _0{}));
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

  auto load_k = [&](int n) {
    Barrier::wait(&smem.k_empty[k_ring.stage], k_ring.phase ^ 1);
    TxBarrier::arrive_and_expect_tx(&smem.k_full[k_ring.stage], kTileBytes);
    copy(p.tma_k.with(smem.k_full[k_ring.stage]), tKgK(_, n), tKsK(_, k_ring.stage));
    k_ring.advance();
  };
  auto load_v = [&](int n) {
    Barrier::wait(&smem.v_empty[v_ring.stage], v_ring.phase ^ 1);
    TxBarrier::arrive_and_expect_tx(&smem.v_full[v_ring.stage], kTileBytes);
    copy(p.tma_v.with(smem.v_full[v_ring.stage]), tVgV(_, n), tVsV(_, v_ring.stage));
    v_ring.advance();
  };
  // The consumers' order: K of the last tile, then K of tile n - 1 before V of tile n, V of tile 0 last. The
  // first K goes ahead of Q: it needs only a free K stage, while Q's tile is free only once both consumers
  // have issued the last S of the item before.
  load_k(key_tiles - 1);
  Barrier::wait(&smem.q_empty, (item & 1) ^ 1);
  TxBarrier::arrive_and_expect_tx(&smem.q_full, kQBytes);
  copy(p.tma_q.with(smem.q_full), tQgQ, tQsQ);
  for (int n = key_tiles - 1; n > 0; --n) {
    load_k(n - 1);
    load_v(n);
  }
  load_v(0);
}

// One work item of the consumers; `thread`: 0..255 over the two consumer warpgroups.
__device__ __forceinline__ void consumer(const Params& p, SharedStorage& smem, const TileWork& work, int head,
                                         int seq_start, int length, int key_tiles, int thread, int item, Ring& k_ring,
                                         Ring& v_ring) {
  MmaQK mma_qk;
  MmaPV mma_pv;
  auto thr_qk = mma_qk.get_thread_slice(thread);
  auto thr_pv = mma_pv.get_thread_slice(thread);
  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), SmemLayoutKV{});
  Tensor sVt = make_tensor(make_smem_ptr(smem.v.data()), SmemLayoutVt{});
  Tensor tSrQ = thr_qk.partition_fragment_A(sQ);    // descriptors of this warpgroup's 64 rows
  Tensor tSrK = thr_qk.partition_fragment_B(sK);    // (MMA, 1, K blocks, stage)
  Tensor tOrVt = thr_pv.partition_fragment_B(sVt);  // (MMA, 1, K blocks, stage)
  Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kBlockN>>{});
  Tensor tOrO = partition_fragment_C(mma_pv, Shape<Int<kBlockM>, Int<kHeadDim>>{});
  // P: the bf16 A operand of P V, value for value in S's register order (the accumulator of a 64 x 16 pair
  // of n8 column blocks is the A fragment of one k16 block).
  Tensor tOrP = make_tensor<Element>(partition_shape_A(mma_pv, Shape<Int<kBlockM>, Int<kBlockN>>{}));
  static_assert(decltype(size(tOrP))::value == decltype(size(tSrS))::value, "P and S hold the same values");
  clear(tOrO);

  const int lane = thread % 32;
  const int row = (thread / 128) * 64 + (thread % 128) / 32 * 16 + lane / 4;  // tile rows row and row + 8
  const bool signals = thread % 128 == 0;  // one arrival per warpgroup on the empty barriers
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f}, rescale[2];

  auto to_p = [&] {
    cutlass::NumericArrayConverter<Element, float, decltype(size(tSrS))::value> convert;
    using From = cutlass::Array<float, decltype(size(tSrS))::value>;
    using To = cutlass::Array<Element, decltype(size(tSrS))::value>;
    *reinterpret_cast<To*>(raw_pointer_cast(tOrP.data())) = convert(*reinterpret_cast<From const*>(raw_pointer_cast(tSrS.data())));
  };
  auto rescale_o = [&] {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(tOrO); ++i) tOrO(i) *= rescale[fragment_half(i)];
  };

  Barrier::wait(&smem.q_full, item & 1);

  // The diagonal tile (the last the tile reads): S, the causal mask, the softmax.
  {
    const int n = key_tiles - 1;
    Barrier::wait(&smem.k_full[k_ring.stage], k_ring.phase);
    issue_gemm<true>(mma_qk, tSrQ, tSrK(_, _, _, k_ring.stage), tSrS);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tSrS);
    if (signals) {
      Barrier::arrive(&smem.k_empty[k_ring.stage]);
      if (key_tiles == 1) Barrier::arrive(&smem.q_empty);  // the item's last S: Q may be replaced
    }
    k_ring.advance();
    const int query0 = work.q_tile * kBlockM + row;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(tSrS); ++i)
      if (n * kBlockN + fragment_column(i, lane) > query0 + 8 * fragment_half(i)) tSrS(i) = -INFINITY;
    softmax_tile(tSrS, row_max, row_sum, rescale, p.scale_log2);
    to_p();
  }
  // Tiles before it, unmasked: S_n's product and softmax overlap P_{n+1} V_{n+1}.
  for (int n = key_tiles - 2; n >= 0; --n) {
    Barrier::wait(&smem.k_full[k_ring.stage], k_ring.phase);
    issue_gemm<true>(mma_qk, tSrQ, tSrK(_, _, _, k_ring.stage), tSrS);
    Barrier::wait(&smem.v_full[v_ring.stage], v_ring.phase);
    issue_gemm<false>(mma_pv, tOrP, tOrVt(_, _, _, v_ring.stage), tOrO);
    warpgroup_wait<1>();  // S_n is done; P V may still run
    warpgroup_fence_operand(tSrS);
    if (signals) {
      Barrier::arrive(&smem.k_empty[k_ring.stage]);
      if (n == 0) Barrier::arrive(&smem.q_empty);  // the item's last S: the next item's Q may load
    }
    k_ring.advance();
    softmax_tile(tSrS, row_max, row_sum, rescale, p.scale_log2);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tOrO);
    warpgroup_fence_operand(tOrP);
    if (signals) Barrier::arrive(&smem.v_empty[v_ring.stage]);
    v_ring.advance();
    rescale_o();
    to_p();
  }
  // The last P V (tile 0).
  Barrier::wait(&smem.v_full[v_ring.stage], v_ring.phase);
  issue_gemm<false>(mma_pv, tOrP, tOrVt(_, _, _, v_ring.stage), tOrO);
  warpgroup_wait<0>();
  warpgroup_fence_operand(tOrO);
  if (signals) Barrier::arrive(&smem.v_empty[v_ring.stage]);
  v_ring.advance();

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
    const int query = work.q_tile * kBlockM + row + 8 * h;
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

}  // namespace prefill
