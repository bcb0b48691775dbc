// The attention kernel: one CTA per (sequence, head block, range of split_pages pages). Each page (64 tokens
// x 576 columns, 72 KB) is copied once into a shared-memory stage and serves both products: S = Q K^T over
// all 576 columns and O = P V over its first 512. The head block's queries stay in shared memory for the
// whole range. Warp (r, c) of the Shape owns head rows 16 r .. 16 r + 15: it computes their scores against
// its slice of the page's keys and accumulates their output in its slice of the 512 columns; the row group's
// warps exchange their partial maxima and their probabilities (bf16) through shared memory, with a barrier
// of the row group's warps only. They share one running maximum, so each keeps the sum over its own keys and
// the sums meet once at the end.
#pragma once

#include <cuda_bf16.h>

#include <cmath>

#include "plan.cuh"
#include "sm80_ops.cuh"

namespace mla {

// Lane-to-row maps of the ldmatrix loads (lane l addresses row l % 8 of matrix l / 8).
// A operand (Q, or P) of k step kk: matrices (rows 0-7 | 8-15) x (chunk 2 kk | 2 kk + 1), a0..a3 in A order.
__device__ __forceinline__ int a_row(int lane) { return ((lane >> 3) & 1) * 8 + (lane & 7); }
__device__ __forceinline__ int a_chunk(int lane, int kk) { return 2 * kk + (lane >> 4); }
// K as the B operand of S = Q K^T, k step kk: b0, b1 of keys 0-7, then b0, b1 of keys 8-15.
__device__ __forceinline__ int k_row(int lane) { return (lane >> 4) * 8 + (lane & 7); }
__device__ __forceinline__ int k_chunk(int lane, int kk) { return 2 * kk + ((lane >> 3) & 1); }
// V (transposed) as the B operand of O = P V for columns 16 jj ..: b0, b1 of columns 16 jj + 0-7 (keys 0-7,
// then 8-15), then of + 8-15.
__device__ __forceinline__ int v_row(int lane) { return ((lane >> 3) & 1) * 8 + (lane & 7); }
__device__ __forceinline__ int v_chunk(int lane, int jj) { return 2 * jj + (lane >> 4); }

// Row (0..15) and column of element e (0..3) of an m16n8 fp32 accumulator, n tile nt: rows lane / 4 and + 8.
__device__ __forceinline__ int c_row(int lane, int e) { return (lane >> 2) + (e >> 1) * 8; }
__device__ __forceinline__ int c_col(int lane, int nt, int e) { return nt * 8 + (lane & 3) * 2 + (e & 1); }

template <int RowGroups, int ColGroups>
__global__ void __launch_bounds__(Shape<RowGroups, ColGroups>::kThreads, 1) attend(Params p) {
  using Cta = Shape<RowGroups, ColGroups>;
  extern __shared__ __align__(128) unsigned char shared[];
  float* row_max = reinterpret_cast<float*>(shared + Cta::kQueryBytes + kStages * kTileBytes + Cta::kProbBytes);  // [C][rows]
  float* row_sum = row_max + ColGroups * Cta::kRows;                                                              // [C][rows]
  const uint32_t query_tile = shared_address(shared);
  const uint32_t stage_tiles = query_tile + Cta::kQueryBytes;
  const uint32_t prob_tile = stage_tiles + kStages * kTileBytes;

  const int head_block = static_cast<int>(blockIdx.x) % p.head_blocks, b = static_cast<int>(blockIdx.x) / p.head_blocks;
  const int split = static_cast<int>(blockIdx.y);
  const int length = p.seq_lens[b * p.seq_lens_stride];
  const int first = split * p.split_pages, pages = pages_of(length);
  if (first >= pages) return;  // a short sequence uses fewer splits
  const int count = min(p.split_pages, pages - first);
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int group = warp / ColGroups, column = warp % ColGroups;  // the warp's row group and its slice
  const int head0 = head_block * Cta::kRows, row0 = group * 16;
  const int key0 = column * Cta::kKeys, col0 = column * Cta::kColumns;
  const int* table = p.block_table + b * p.table_seq;

  // The head block's queries, then the range's first page: one copy group.
  for (int i = tid; i < Cta::kRows * kRowChunks; i += Cta::kThreads) {
    const int row = i / kRowChunks, chunk = i % kRowChunks;
    cp_async_16(query_tile + swizzled<kRowChunks>(row, chunk), p.q + b * p.q_seq + (head0 + row) * p.q_head + chunk * 8, 16);
  }
  // Page n of the range (physical page `physical`) into stage n % kStages; rows past seq_len zero-filled, unread.
  const auto issue = [&](int n, int physical) {
    const int rows = valid_rows(first + n, length);
    const uint32_t stage = stage_tiles + (n % kStages) * kTileBytes;
    const __nv_bfloat16* page = p.cache + static_cast<int64_t>(physical) * p.cache_page;
    for (int i = tid; i < kPage * kRowChunks; i += Cta::kThreads) {
      const int row = i / kRowChunks, chunk = i % kRowChunks;
      const bool live = row < rows;
      cp_async_16(stage + swizzled<kRowChunks>(row, chunk), page + (live ? row : 0) * p.cache_token + chunk * 8, live ? 16 : 0);
    }
  };
  int upcoming = table[first * p.table_page];  // the physical page of the next copy, read one page ahead
  issue(0, upcoming);
  cp_async_commit();
  if (count > 1) upcoming = table[(first + 1) * p.table_page];

  float o[Cta::kOutTiles][4];
#pragma unroll
  for (int j = 0; j < Cta::kOutTiles; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY};  // running maximum of the base-2 scores of rows lane / 4 and + 8
  float l[2] = {0.0f, 0.0f};            // this lane's share of the sum over the warp's keys

  for (int n = 0; n < count; ++n) {
    // Page n has landed for every thread, and every warp is done with page n - 1: its stage may be refilled.
    cp_async_wait_all();
    __syncthreads();
    if (n + 1 < count) {
      issue(n + 1, upcoming);
      if (n + 2 < count) upcoming = table[(first + n + 2) * p.table_page];
    }
    cp_async_commit();
    const uint32_t tile = stage_tiles + (n % kStages) * kTileBytes;
    const int rows = valid_rows(first + n, length);

    // S = Q K^T for the warp's 16 rows and kKeys keys, over the 576 columns.
    float s[Cta::kScoreTiles][4];
#pragma unroll
    for (int t = 0; t < Cta::kScoreTiles; ++t) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.0f;
#pragma unroll 4
    for (int kk = 0; kk < kWidth / 16; ++kk) {
      uint32_t a[4];
      ldmatrix_x4(a, query_tile + swizzled<kRowChunks>(row0 + a_row(lane), a_chunk(lane, kk)));
      if constexpr (Cta::kScoreTiles == 1) {
        uint32_t kb[2];
        ldmatrix_x2(kb, tile + swizzled<kRowChunks>(key0 + (lane & 7), 2 * kk + ((lane >> 3) & 1)));
        mma_bf16(s[0], a, kb[0], kb[1]);
      } else {
#pragma unroll
        for (int pair = 0; pair < Cta::kScoreTiles / 2; ++pair) {
          uint32_t kb[4];
          ldmatrix_x4(kb, tile + swizzled<kRowChunks>(key0 + 16 * pair + k_row(lane), k_chunk(lane, kk)));
          mma_bf16(s[2 * pair], a, kb[0], kb[1]);
          mma_bf16(s[2 * pair + 1], a, kb[2], kb[3]);
        }
      }
    }

    // Base-2 scores, keys past the context at -inf; the warp's maximum of each row, then the row group's.
    float part[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int t = 0; t < Cta::kScoreTiles; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[t][e] = key0 + c_col(lane, t, e) < rows ? s[t][e] * p.scale_log2 : -INFINITY;
        part[e >> 1] = fmaxf(part[e >> 1], s[t][e]);
      }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      part[i] = fmaxf(part[i], __shfl_xor_sync(0xffffffffu, part[i], 1));
      part[i] = fmaxf(part[i], __shfl_xor_sync(0xffffffffu, part[i], 2));
    }
    if ((lane & 3) == 0) {
      row_max[column * Cta::kRows + row0 + c_row(lane, 0)] = part[0];
      row_max[column * Cta::kRows + row0 + c_row(lane, 2)] = part[1];
    }
    named_barrier(1 + group, 32 * ColGroups);
    float rescale[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float page_max = -INFINITY;
#pragma unroll
      for (int c = 0; c < ColGroups; ++c) page_max = fmaxf(page_max, row_max[c * Cta::kRows + row0 + c_row(lane, 2 * i)]);
      // Every page holds at least one key, so the maximum is finite; the first page rescales by 2^-inf = 0.
      const float next = fmaxf(m[i], page_max);
      rescale[i] = exp2_approx(m[i] - next);
      m[i] = next;
      l[i] *= rescale[i];
    }
    // P = 2^(S - m) in fp32 for the sum, rounded to bf16 into shared memory for the P V operand.
#pragma unroll
    for (int t = 0; t < Cta::kScoreTiles; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[t][e] = exp2_approx(s[t][e] - m[e >> 1]);
        l[e >> 1] += s[t][e];
      }
      const int key = key0 + c_col(lane, t, 0);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int row = row0 + c_row(lane, 2 * i);
        const uint32_t address = prob_tile + swizzled<kPChunks>(row, key >> 3) + (key & 7) * 2;
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(address), "r"(pack_bf16(s[t][2 * i], s[t][2 * i + 1])) : "memory");
      }
    }
#pragma unroll
    for (int j = 0; j < Cta::kOutTiles; ++j) {
      o[j][0] *= rescale[0], o[j][1] *= rescale[0];
      o[j][2] *= rescale[1], o[j][3] *= rescale[1];
    }
    named_barrier(1 + group, 32 * ColGroups);

    // O += P V for the warp's 16 rows and kColumns columns: P over all 64 keys, V the page's first 512 columns.
    uint32_t pa[kPage / 16][4];
#pragma unroll
    for (int ks = 0; ks < kPage / 16; ++ks) ldmatrix_x4(pa[ks], prob_tile + swizzled<kPChunks>(row0 + a_row(lane), a_chunk(lane, ks)));
#pragma unroll
    for (int jj = 0; jj < Cta::kOutTiles / 2; ++jj)
#pragma unroll
      for (int ks = 0; ks < kPage / 16; ++ks) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, tile + swizzled<kRowChunks>(16 * ks + v_row(lane), col0 / 8 + v_chunk(lane, jj)));
        mma_bf16(o[2 * jj], pa[ks], vb[0], vb[1]);
        mma_bf16(o[2 * jj + 1], pa[ks], vb[2], vb[3]);
      }
  }
  cp_async_wait_all();

  // The row group's sums: each warp's over its keys, added once.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
  }
  if ((lane & 3) == 0) {
    row_sum[column * Cta::kRows + row0 + c_row(lane, 0)] = l[0];
    row_sum[column * Cta::kRows + row0 + c_row(lane, 2)] = l[1];
  }
  named_barrier(1 + group, 32 * ColGroups);
  const bool alone = splits_used(length, p.split_pages) == 1;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float total = 0.0f;
#pragma unroll
    for (int c = 0; c < ColGroups; ++c) total += row_sum[c * Cta::kRows + row0 + c_row(lane, 2 * i)];
    const float inverse = 1.0f / total, lse2 = m[i] + log2f(total);
    const int h = head0 + row0 + c_row(lane, 2 * i);
    if (alone) {
      __nv_bfloat16* out = p.o + b * p.o_seq + h * p.o_head + col0;
#pragma unroll
      for (int j = 0; j < Cta::kOutTiles; ++j)
        *reinterpret_cast<uint32_t*>(out + c_col(lane, j, 0)) = pack_bf16(o[j][2 * i] * inverse, o[j][2 * i + 1] * inverse);
      if (column == 0 && (lane & 3) == 0) p.lse[b * p.lse_seq + h * p.lse_head] = lse2 * 0.6931471805599453f;
    } else {
      const int64_t at = partial_index(b, h, split, p.heads, p.splits);
      float* out = p.partial_o + at * kValues + col0;
#pragma unroll
      for (int j = 0; j < Cta::kOutTiles; ++j)
        *reinterpret_cast<float2*>(out + c_col(lane, j, 0)) = make_float2(o[j][2 * i] * inverse, o[j][2 * i + 1] * inverse);
      if (column == 0 && (lane & 3) == 0) p.partial_lse[at] = lse2;
    }
  }
}

}  // namespace mla
