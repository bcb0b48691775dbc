// The 16-head path (tensor parallel 8), version 3: memory-bound, so the kernel's whole job is to keep the
// DRAM busy: every SM streams the same number of pages with 112-184 KB of them in flight, and spends
// as little time as possible on each.
//
// Floor (deepseek-v3-tp8-B64-ctx8192): 606 MB at the read rate 4.4 TB/s is 137.8 us, 144.1 us at the copy
// rate 4.2 TB/s; issue 13's bar (80% of copy) 180.1 us. v2 measured 199.5 us: it pads the 16 heads to the
// wgmma M of 64, so every page costs what a 64-head page costs (about 2.6 us on one SM at B 128, from v2's
// measurement there), above a fair SM's share of the bandwidth per page (72 KB in 2.4 us at 4 TB/s over
// 132 SMs); and two 72 KB stages leave one page in flight while the other is computed.
//
// Design (attend_small):
// - Work: one persistent CTA per SM. The batch's pages, sequence after sequence, are cut into `ctas` equal
//   ranges (even_split.cuh: 62 or 63 pages each at TP8 B 64), found on the device from the lengths in the
//   prologue. A range holds pieces: whole sequences (o and lse written directly) and at most two cut ones
//   (its first and last), which leave fp32 partials for merge_pieces.
// - Shared memory is a ring of 23 slots of 8 KB, each one TMA box (64 tokens x 64 columns, the 128-byte
//   swizzle): a page is 9 consecutive slots (wrapping), each with its own full and empty mbarrier, so the
//   producer refills a slot as soon as it is released and the ring carries 2.5 pages across pieces without
//   draining. Beside it two query buffers (16 x 576, 18 KB each: the next piece's queries load while the
//   current piece runs), P (2 KB) and the reductions.
// - Warp 4, the producer: the piece's queries (9 TMA boxes of 16 x 64), then its pages, 9 boxes a page
//   (the block table read 32 entries at a time, one per lane).
// - Warps 0-3, one consumer warpgroup, with the heads as the wgmma N and the page's 64 keys as M (no
//   padding): S^T = K Q^T (64 keys x 16 heads, 36 wgmma m64n16k16 over the 576 columns: K from the slots,
//   Q from its buffer, both K-major); the online softmax of each head (a column of S^T: a maximum over the
//   warp's 16 keys by shuffles, over the 4 warps through shared memory); P^T to shared memory in bf16;
//   O^T += V^T P^T (512 value columns x 16 heads, 32 wgmma m64n16k16: V^T read MN-major from the first 8
//   slots of the page, no transposed copy; 64 fp32 accumulators a thread). Each thread keeps its own partial
//   sum of its keys' probabilities (same maximum for all, so the sums add at the end).
// - A page is computed whole, S then the softmax then P V, and released: the compute is not overlapped with
//   itself (it is short: below) but with the loads of the 1.5 pages behind it.
//
// Per page, shared-memory traffic bounds the compute: the S wgmma read 36 x (2 KB of K + 0.5 KB of Q) =
// 90 KB, the P V wgmma 32 x (2 KB of V + 0.5 KB of P) = 80 KB: 1330 clocks at 128 B a clock, beside TMA's
// 72 KB of writes (576) and the softmax (about 300 clocks, two named barriers): about 1.0-1.2 us at
// 1.75 GHz, half of a page's DRAM time per SM (2.4-2.6 us). The tensor cores' own time is 544 clocks.
//
// Bytes in flight: while a page is computed, the next page and 5 slots of the one after (14 slots, 112 KB);
// while the consumer waits, all 23 (184 KB). About 150 KB on average per SM, 20 MB over 132 SMs: at 4 TB/s
// that covers 5 us of latency, more than twice what loaded DRAM latency should be.
//
// Prediction (before any GPU run): 604 MB at 3.8-4.1 TB/s = 147-159 us; plus the prologue (launch, the
// lengths' scan, the first queries and page) 2-3 us, the tail (63 pages against 62.06, the last page's
// compute and stores) 2-3 us, and merge_pieces (about 6 MB of partials from L2 and 1 MB of o, with its
// launch) 3-4 us: 155-170 us (85-93% of copy).
//
// Partial last page: TMA copies the whole box (dead rows hold another sequence's data); the scores of keys at
// or past seq_len are -inf before the maximum (p exactly 0) and the dead rows' first 512 columns are zeroed
// in the slots before P V, so that 0 x Inf cannot make a NaN.
#pragma once

#include "even_split.cuh"
#include "hopper_decode.cuh"

namespace mla {
namespace small {

using namespace cute;

constexpr int kHeads = 16;                   // H of this path: the wgmma N
constexpr int kBlocks = kWidth / 64;         // slots a page: 8 of values, 1 of rotary columns
constexpr int kValueBlocks = kValues / 64;   // the slots P V reads
constexpr int kSlotElements = kPage * 64;    // one slot: 64 tokens x 64 columns (8 KB)
constexpr int kSlotBytes = kSlotElements * 2;
constexpr int kSlots = 23;                   // what fits beside two query buffers: 2.56 pages
constexpr int kQElements = kHeads * kWidth;  // one query buffer (18 KB)
constexpr int kQBlockElements = kHeads * 64;
constexpr int kConsumerWarps = 4;
constexpr int kThreads = 32 * (kConsumerWarps + 1);  // the consumer warpgroup, then the producer warp
constexpr int kConsumerBarrier = 1;                  // named barrier of the consumer warpgroup
static_assert(kSlots >= 2 * kBlocks, "the ring holds the page being computed and the next");

using SmemLayoutSlot = SmemLayoutBox<kPage>;     // (64 keys, 64 columns), K-major
using SmemLayoutQBlock = SmemLayoutBox<kHeads>;  // (16 heads, 64 columns), K-major; also P^T (16 heads, 64 keys)
// V^T of one slot: (64 value columns, 64 keys), the same bytes, the value columns fastest (MN-major A).
using SmemLayoutVtSlot = decltype(composition(SmemLayoutSlot{}, Layout<Shape<_64, _64>, Stride<_64, _1>>{}));

// S^T = K Q^T: (64 keys, 16 heads, 64 columns of a slot), both operands K-major in shared memory.
using MmaS = decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kHeads>, _64>>()));
// O^T += V^T P^T: (64 value columns, 16 heads, 64 keys), V^T MN-major, P^T K-major.
using MmaO = decltype(make_tiled_mma(
    GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kHeads>, _64>, GMMA::Major::MN, GMMA::Major::K>()));
using FragS = decltype(partition_fragment_C(MmaS{}, Shape<_64, Int<kHeads>>{}));
using FragO = decltype(partition_fragment_C(MmaO{}, Shape<_64, Int<kHeads>>{}));

using Tiles = Config<kHeads, 1>;  // its TMA copies: queries in boxes of 16 x 64, pages in boxes of 64 x 64

// What the merge needs beside Params: where each sequence's pages start in the batch's list, and the split.
struct Split {
  int* page_start;  // [B + 1]: the first page of each sequence in the list, then the total (CTA 0 writes it)
  int batch;
  int ctas;
};

struct KernelParams {
  Tiles::TmaQ tma_q;
  Tiles::TmaPage tma_page;
  GmemShape q_shape, cache_shape;  // (16, 576, B) and (64, 576, NB)
  Params common;
  Split split;
};

struct Storage {
  array_aligned<Element, 2 * kQElements, 1024> q;
  array_aligned<Element, kSlots * kSlotElements, 1024> slots;
  array_aligned<Element, kHeads * kPage, 1024> p;  // P^T (16 heads, 64 keys), bf16
  float red_max[kConsumerWarps][kHeads];
  float red_sum[kConsumerWarps][kHeads];
  uint64_t full[kSlots], empty[kSlots];
  uint64_t q_full[2], q_empty[2];
  int start_b, start_page, pages;  // where the CTA's range starts, and its length in pages
};
constexpr int kSharedBytes = static_cast<int>(sizeof(Storage)) + 1024;
static_assert(kSharedBytes <= 227 * 1024, "one CTA per SM");

// The ring of slots: the next one and the parity of its barriers' current phase.
struct SlotRing {
  int slot = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++slot == kSlots) slot = 0, phase ^= 1;
  }
};

// The accumulator of a 64 x 16 wgmma, per thread (as fragment_row and fragment_column): value i sits in row
// 16 warp + lane / 4 + 8 ((i / 2) % 2) and column 8 (i / 4) + 2 (lane % 4) + i % 2. A thread holds 4 of the
// 16 columns (heads), here numbered j = 2 (i / 4) + i % 2. (Checked against CuTe's layouts on the host.)
__host__ __device__ __forceinline__ int head_slot(int i) { return 2 * (i / 4) + i % 2; }
__host__ __device__ __forceinline__ int head_of(int j, int lane) { return 8 * (j / 2) + 2 * (lane % 4) + j % 2; }
__host__ __device__ __forceinline__ int row_of(int i, int thread) { return thread / 32 * 16 + thread % 32 / 4 + 8 * ((i / 2) % 2); }

// The prologue, by the producer warp: the batch's page count, this CTA's range and the sequence and page where
// it starts. CTA 0 also writes every sequence's first page (and the total) for the merge.
__device__ __forceinline__ void locate(const Params& p, const Split& split, Storage& smem, int lane) {
  const int batch = split.batch;
  auto pages = [&](int b) { return b < batch ? even::pages_in(p.seq_lens[static_cast<int64_t>(b) * p.seq_lens_stride]) : 0; };
  int mine_total = 0;  // the lane's sequences first (independent loads), then one reduction
#pragma unroll 4
  for (int b = lane; b < batch; b += 32) mine_total += pages(b);
  const int total = __reduce_add_sync(0xffffffffu, mine_total);
  const int cta = static_cast<int>(blockIdx.x);
  const int first = even::range_start(cta, total, split.ctas), end = even::range_start(cta + 1, total, split.ctas);
  const bool writes = cta == 0;
  int start_b = batch, start_page = 0, before = 0;
  for (int base = 0; base < batch; base += 32) {
    const int b = base + lane, mine = pages(b);
    int inclusive = mine;
    CUTLASS_PRAGMA_UNROLL
    for (int d = 1; d < 32; d *= 2) {
      const int up = __shfl_up_sync(0xffffffffu, inclusive, d);
      if (lane >= d) inclusive += up;
    }
    const int exclusive = before + inclusive - mine;
    if (writes && b < batch) split.page_start[b] = exclusive;
    const unsigned hit = __ballot_sync(0xffffffffu, b < batch && exclusive <= first && first < exclusive + mine);
    if (start_b == batch && hit != 0u) {
      const int source = __ffs(hit) - 1;
      start_b = base + source;
      start_page = first - __shfl_sync(0xffffffffu, exclusive, source);
    }
    before += __shfl_sync(0xffffffffu, inclusive, 31);
    if (start_b < batch && !writes) break;
  }
  if (writes && lane == 0) split.page_start[batch] = total;
  if (lane == 0) smem.start_b = start_b, smem.start_page = start_page, smem.pages = end - first;
}

__device__ __forceinline__ even::Walker walker_of(const Params& p, const Storage& smem) {
  return even::Walker{p.seq_lens, p.seq_lens_stride, smem.start_b, smem.start_page, smem.pages, 0};
}

// Warp 4: each piece's queries into buffer (index % 2), then its pages, 9 slots a page.
__device__ __forceinline__ void produce(const KernelParams& kp, Storage& smem, int lane) {
  const Params& p = kp.common;
  if (lane == 0) {
    prefetch_tma_descriptor(kp.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(kp.tma_page.get_tma_descriptor());
  }
  Tensor mQ = kp.tma_q.get_tma_tensor(kp.q_shape);              // (16, 576, B)
  Tensor mPages = kp.tma_page.get_tma_tensor(kp.cache_shape);  // (64, 576, NB)
  even::Walker walk = walker_of(p, smem);
  even::Piece piece;
  SlotRing ring;
  while (walk.next(piece)) {
    const int buffer = piece.index & 1;
    if (lane == 0) {
      Barrier::wait(&smem.q_empty[buffer], ((piece.index >> 1) & 1) ^ 1);
      TxBarrier::arrive_and_expect_tx(&smem.q_full[buffer], kQElements * 2);
      Tensor mQb = mQ(_, _, piece.b);
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < kBlocks; ++c) {
        Tensor g = local_tile(mQb, Shape<Int<kHeads>, _64>{}, make_coord(0, c));
        Tensor s = make_tensor(make_smem_ptr(smem.q.data() + buffer * kQElements + c * kQBlockElements), SmemLayoutQBlock{});
        auto part = tma_partition(kp.tma_q, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(s), group_modes<0, 2>(g));
        copy(kp.tma_q.with(smem.q_full[buffer]), get<0>(part), get<1>(part));
      }
    }
    const int* table = p.block_table + piece.b * p.table_seq + static_cast<int64_t>(piece.first) * p.table_page;
    for (int n0 = 0; n0 < piece.count; n0 += 32) {
      const int mine = n0 + lane < piece.count ? table[(n0 + lane) * p.table_page] : 0;  // 32 page numbers at once
      const int chunk = min(32, piece.count - n0);
      for (int n = 0; n < chunk; ++n) {
        const int page = __shfl_sync(0xffffffffu, mine, n);
        if (lane == 0) {
          Tensor gPage = mPages(_, _, page);
          CUTLASS_PRAGMA_UNROLL
          for (int c = 0; c < kBlocks; ++c) {
            Barrier::wait(&smem.empty[ring.slot], ring.phase ^ 1);
            TxBarrier::arrive_and_expect_tx(&smem.full[ring.slot], kSlotBytes);
            Tensor g = local_tile(gPage, Shape<_64, _64>{}, make_coord(0, c));
            Tensor s = make_tensor(make_smem_ptr(smem.slots.data() + ring.slot * kSlotElements), SmemLayoutSlot{});
            auto part = tma_partition(kp.tma_page, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(s), group_modes<0, 2>(g));
            copy(kp.tma_page.with(smem.full[ring.slot], 0, TMA::CacheHintSm90::EVICT_FIRST), get<0>(part), get<1>(part));
            ring.advance();
          }
        }
        __syncwarp();
      }
    }
  }
}

// Warps 0-3 (`thread` 0..127): every page of every piece: S^T, the softmax, O^T += V^T P^T; then the piece's
// o and lse, or its partials.
__device__ __forceinline__ void consume(const KernelParams& kp, Storage& smem, int thread) {
  const Params& p = kp.common;
  const int lane = thread % 32, warp = thread / 32;
  MmaS mma_s;
  MmaO mma_o;
  auto thr_s = mma_s.get_thread_slice(thread);
  auto thr_o = mma_o.get_thread_slice(thread);
  FragS tSrS = partition_fragment_C(mma_s, Shape<_64, Int<kHeads>>{});
  FragO tOrO[kValueBlocks];
  const uint32_t p_tile = cast_smem_ptr_to_uint(smem.p.data());
  const uint32_t slots_tile = cast_smem_ptr_to_uint(smem.slots.data());

  even::Walker walk = walker_of(p, smem);
  even::Piece piece;
  SlotRing ring;
  while (walk.next(piece)) {
    const int buffer = piece.index & 1;
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < kValueBlocks; ++c) clear(tOrO[c]);
    float row_max[4], row_sum[4];  // per head j: the running maximum (base 2, scaled), this thread's sum
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < 4; ++j) row_max[j] = -INFINITY, row_sum[j] = 0.0f;
    Barrier::wait(&smem.q_full[buffer], static_cast<uint32_t>((piece.index >> 1) & 1));
    Element* q = smem.q.data() + buffer * kQElements;

    for (int n = 0; n < piece.count; ++n) {
      // The page's 9 slots, landed.
      int slot[kBlocks];
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < kBlocks; ++c) {
        slot[c] = ring.slot;
        Barrier::wait(&smem.full[ring.slot], ring.phase);
        ring.advance();
      }

      // S^T = K Q^T: 9 slots x 4 k-steps.
      warpgroup_fence_operand(tSrS);
      warpgroup_arrive();
      mma_s.accumulate_ = GMMA::ScaleOut::Zero;
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < kBlocks; ++c) {
        Tensor sK = make_tensor(make_smem_ptr(smem.slots.data() + slot[c] * kSlotElements), SmemLayoutSlot{});
        Tensor sQ = make_tensor(make_smem_ptr(opaque(q) + c * kQBlockElements), SmemLayoutQBlock{});
        Tensor tSrK = thr_s.partition_fragment_A(sK);  // (MMA, 1, 4) descriptors
        Tensor tSrQ = thr_s.partition_fragment_B(sQ);
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < size<2>(tSrK); ++k) {
          cute::gemm(mma_s, tSrK(_, _, k), tSrQ(_, _, k), tSrS);
          mma_s.accumulate_ = GMMA::ScaleOut::One;
        }
      }
      warpgroup_commit_batch();
      warpgroup_wait<0>();
      warpgroup_fence_operand(tSrS);
      if (n + 1 == piece.count) {  // the piece's last S: its queries' buffer is free
        __syncwarp();
        if (lane == 0) Barrier::arrive(&smem.q_empty[buffer]);
      }

      // The softmax of each head over the page's keys; keys at or past seq_len are -inf.
      const int valid = min(kPage, piece.length - (piece.first + n) * kPage);
      if (valid < kPage) {
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(tSrS); ++i)
          if (row_of(i, thread) >= valid) tSrS(i) = -INFINITY;
      }
      float page_max[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(tSrS); ++i) page_max[head_slot(i)] = fmaxf(page_max[head_slot(i)], tSrS(i));
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < 4; ++j) {
        page_max[j] = fmaxf(page_max[j], __shfl_xor_sync(0xffffffffu, page_max[j], 4));
        page_max[j] = fmaxf(page_max[j], __shfl_xor_sync(0xffffffffu, page_max[j], 8));
        page_max[j] = fmaxf(page_max[j], __shfl_xor_sync(0xffffffffu, page_max[j], 16));
        if (lane < 4) smem.red_max[warp][head_of(j, lane)] = page_max[j];
      }
      named_sync(kConsumerBarrier, 128);
      float factor[4];
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < 4; ++j) {
        const int h = head_of(j, lane);
        // Every page holds a key of the context, so the page's maximum is finite; the piece's first page
        // moves the maximum from -inf (factor 0 against a zero output and sum).
        const float top =
            fmaxf(fmaxf(smem.red_max[0][h], smem.red_max[1][h]), fmaxf(smem.red_max[2][h], smem.red_max[3][h])) * p.scale_log2;
        if (top > row_max[j]) {
          factor[j] = exp2_approx(row_max[j] - top);
          row_max[j] = top;
        } else {
          factor[j] = 1.0f;
        }
        row_sum[j] *= factor[j];
      }
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(tSrS); ++i) {
        const int j = head_slot(i);
        const float prob = exp2_approx(fmaf(tSrS(i), p.scale_log2, -row_max[j]));
        row_sum[j] += prob;
        const __nv_bfloat16 rounded = __float2bfloat16_rn(prob);
        const uint32_t address = p_tile + tile_offset(head_of(j, lane), row_of(i, thread));
        asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(address), "h"(*reinterpret_cast<const uint16_t*>(&rounded)) : "memory");
      }
      // A sequence's partial last page: its dead rows' value columns to zero.
      if (valid < kPage) {
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < kValueBlocks; ++c) {
          const uint32_t tile = slots_tile + slot[c] * kSlotBytes;
          for (int i = thread; i < (kPage - valid) * 8; i += 128) {
            const int row = valid + i / 8;
            asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(tile + tile_offset(row, (i % 8) * 8)), "r"(0) : "memory");
          }
        }
      }
      cutlass::arch::fence_view_async_shared();  // P and the zeros, before the wgmma reads them
      named_sync(kConsumerBarrier, 128);

      // The output's rows (heads) rescaled, unless every head of the warp kept its maximum.
      if (__any_sync(0xffffffffu, factor[0] != 1.0f || factor[1] != 1.0f || factor[2] != 1.0f || factor[3] != 1.0f)) {
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < kValueBlocks; ++c)
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < size(tOrO[c]); ++i) tOrO[c](i) *= factor[head_slot(i)];
      }

      // O^T += V^T P^T: 8 value slots x 4 k-steps.
      Tensor sP = make_tensor(make_smem_ptr(opaque(smem.p.data())), SmemLayoutQBlock{});
      Tensor tOrP = thr_o.partition_fragment_B(sP);  // (MMA, 1, 4)
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < kValueBlocks; ++c) warpgroup_fence_operand(tOrO[c]);
      warpgroup_arrive();
      mma_o.accumulate_ = GMMA::ScaleOut::One;
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < kValueBlocks; ++c) {
        Tensor sVt = make_tensor(make_smem_ptr(smem.slots.data() + slot[c] * kSlotElements), SmemLayoutVtSlot{});
        Tensor tOrV = thr_o.partition_fragment_A(sVt);  // (MMA, 1, 4)
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < size<2>(tOrV); ++k) cute::gemm(mma_o, tOrV(_, _, k), tOrP(_, _, k), tOrO[c]);
      }
      warpgroup_commit_batch();
      warpgroup_wait<0>();
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < kValueBlocks; ++c) warpgroup_fence_operand(tOrO[c]);

      // The page's slots back to the producer: one arrival per warp, after its wgmma reads are complete.
      __syncwarp();
      if (lane == 0) {
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < kBlocks; ++c) Barrier::arrive(&smem.empty[slot[c]]);
      }
    }

    // The heads' sums: over the warp's keys by shuffles, over the warps through shared memory (fixed order).
    float total[4];
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < 4; ++j) {
      float s = row_sum[j];
      s += __shfl_xor_sync(0xffffffffu, s, 4);
      s += __shfl_xor_sync(0xffffffffu, s, 8);
      s += __shfl_xor_sync(0xffffffffu, s, 16);
      if (lane < 4) smem.red_sum[warp][head_of(j, lane)] = s;
    }
    named_sync(kConsumerBarrier, 128);
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < 4; ++j) {
      const int h = head_of(j, lane);
      total[j] = ((smem.red_sum[0][h] + smem.red_sum[1][h]) + smem.red_sum[2][h]) + smem.red_sum[3][h];
    }

    // The piece's output: o (bf16) and the natural-log lse for a whole sequence, else the normalized fp32
    // partial and its base-2 LSE.
    float inverse[4];
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < 4; ++j) inverse[j] = 1.0f / total[j];
    if (piece.whole) {
      __nv_bfloat16* out = p.o + piece.b * p.o_seq;
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < kValueBlocks; ++c)
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(tOrO[c]); ++i) {
          const int j = head_slot(i);
          out[head_of(j, lane) * p.o_head + c * 64 + row_of(i, thread)] = __float2bfloat16_rn(tOrO[c](i) * inverse[j]);
        }
      if (warp == 0 && lane < 4)
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < 4; ++j)
          p.lse[piece.b * p.lse_seq + head_of(j, lane) * p.lse_head] = (row_max[j] + log2f(total[j])) * 0.6931471805599453f;
    } else {
      const int cta = static_cast<int>(blockIdx.x);
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < kValueBlocks; ++c)
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(tOrO[c]); ++i) {
          const int j = head_slot(i);
          const int64_t row = even::partial_row(cta, piece.slot, head_of(j, lane), kHeads);
          p.partial_o[row * kValues + c * 64 + row_of(i, thread)] = tOrO[c](i) * inverse[j];
        }
      if (warp == 0 && lane < 4)
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < 4; ++j)
          p.partial_lse[even::partial_row(cta, piece.slot, head_of(j, lane), kHeads)] = row_max[j] + log2f(total[j]);
    }
  }
}

// One persistent CTA per SM (grid = split.ctas).
__global__ void __launch_bounds__(kThreads, 1) attend_small(const __grid_constant__ KernelParams kp) {
  extern __shared__ unsigned char shared[];
  auto& smem = *reinterpret_cast<Storage*>((reinterpret_cast<uintptr_t>(shared) + 1023) & ~uintptr_t{1023});
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (warp == kConsumerWarps) {
    locate(kp.common, kp.split, smem, lane);
    if (lane == 0) {
      for (int s = 0; s < kSlots; ++s) {
        TxBarrier::init(&smem.full[s], 1);
        Barrier::init(&smem.empty[s], kConsumerWarps);
      }
      for (int b = 0; b < 2; ++b) {
        TxBarrier::init(&smem.q_full[b], 1);
        Barrier::init(&smem.q_empty[b], kConsumerWarps);
      }
      cutlass::arch::fence_barrier_init();
    }
  }
  __syncthreads();
  if (smem.pages == 0) return;
  if (warp == kConsumerWarps)
    produce(kp, smem, lane);
  else
    consume(kp, smem, static_cast<int>(threadIdx.x));
}

// The merge of cut sequences: one CTA of 128 threads (4 columns each) per (sequence, head). The pieces are
// the CTAs whose ranges hold the sequence's pages, in CTA order (even::PieceCtas).
constexpr int kMergeThreads = kValues / 4;

__global__ void __launch_bounds__(kMergeThreads) merge_pieces(Params p, Split split) {
  const int b = static_cast<int>(blockIdx.x) / kHeads, h = static_cast<int>(blockIdx.x) % kHeads;
  const int start = split.page_start[b], end = split.page_start[b + 1], total = split.page_start[split.batch];
  if (end <= start) return;  // no pages (length 0)
  if (even::owner(start, total, split.ctas) == even::owner(end - 1, total, split.ctas)) return;  // one piece: written by attend_small
  auto row_of = [&](const even::PieceCtas& piece) { return even::partial_row(piece.cta, piece.slot(), h, kHeads); };
  float m = -INFINITY;
  for (even::PieceCtas piece(start, end, total, split.ctas);;) {
    m = fmaxf(m, p.partial_lse[row_of(piece)]);
    if (!piece.advance()) break;
  }
  float sum = 0.0f;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const int column = static_cast<int>(threadIdx.x) * 4;
  for (even::PieceCtas piece(start, end, total, split.ctas);;) {
    const int64_t row = row_of(piece);
    const float weight = exp2_approx(p.partial_lse[row] - m);
    const float4 part = __ldg(reinterpret_cast<const float4*>(p.partial_o + row * kValues + column));
    sum += weight;
    acc.x += weight * part.x, acc.y += weight * part.y, acc.z += weight * part.z, acc.w += weight * part.w;
    if (!piece.advance()) break;
  }
  const float inverse = 1.0f / sum;
  const uint2 packed = make_uint2(pack_bf16(acc.x * inverse, acc.y * inverse), pack_bf16(acc.z * inverse, acc.w * inverse));
  *reinterpret_cast<uint2*>(p.o + b * p.o_seq + h * p.o_head + column) = packed;
  if (threadIdx.x == 0) p.lse[b * p.lse_seq + h * p.lse_head] = (m + log2f(sum)) * 0.6931471805599453f;
}

// Workspace: partial outputs and LSEs for two pieces per CTA, then page_start [B + 1].
inline size_t partial_floats(int ctas) { return static_cast<size_t>(ctas) * 2 * kHeads * kValues; }
inline size_t lse_floats(int ctas) { return static_cast<size_t>(ctas) * 2 * kHeads; }
inline size_t workspace_bytes(int64_t batch, int ctas) {
  return (partial_floats(ctas) + lse_floats(ctas)) * 4 + static_cast<size_t>(batch + 1) * 4;
}

}  // namespace small
}  // namespace mla
