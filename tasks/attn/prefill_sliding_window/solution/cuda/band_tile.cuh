// One CTA's work in the FlashAttention-2 style on mma.sync, attn/prefill_causal_gqa's tile loop (its
// fa2_tile.cuh, copied) made to walk the band: a tile of BM = 128 query rows of one head, 8 warps of 16 rows
// each, against only the key tiles the band reaches (band.cuh: from the first row's left edge to the last
// row), an online softmax kept in registers. Q is loaded once into shared memory and stays there; K and V
// tiles go through a three-stage cp.async ring. Only the edge tiles (the diagonal and the window's left
// edge) are masked; a warp that sees none of a tile skips its math.
//
// Templated on the head dim, 128 or 64: the swizzled row is D / 8 chunks, the per-warp output D / 8 n8
// tiles; the fragment addressing is the causal kernel's, whose XOR steps stay inside a row at either width.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "band.cuh"
#include "schedule.cuh"
#include "sm80_ops.cuh"

namespace sliding {

constexpr int kBlockM = 128;  // query rows per CTA
constexpr int kBlockN = 64;   // keys per tile
constexpr int kWarps = 8;     // 16 query rows each
constexpr int kThreads = kWarps * 32;
constexpr int kStages = 3;    // K/V tiles in flight, as in the causal kernel

// The sizes that follow from the head dim.
template <int HeadDim>
struct Shape {
  static_assert(HeadDim == 128 || HeadDim == 64, "head dims 128 and 64");
  static constexpr int kChunksPerRow = HeadDim * 2 / 16;  // 16-byte chunks in a row of D bf16
  static constexpr uint32_t kRowBytes = HeadDim * 2;
  static constexpr int kQBytes = kBlockM * HeadDim * 2;
  static constexpr int kKVTileBytes = kBlockN * HeadDim * 2;
  static constexpr int kSharedBytes = kQBytes + 2 * kStages * kKVTileBytes;  // Q, then K stages, then V stages
  // D 128: 16 x 128 fp32 of output per warp and the scores need about 190 registers, one CTA (128 KB) per
  // SM. D 64: half the output, 64 KB of shared memory: two CTAs per SM at 128 registers.
  static constexpr int kMinBlocks = HeadDim == 64 ? 2 : 1;
};

struct Params {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k;
  const __nv_bfloat16* v;
  __nv_bfloat16* o;
  float* lse;
  const int* cu_seqlens;
  int64_t q_token, q_head;    // strides in elements (the last dimension is contiguous)
  int64_t k_token, k_head;
  int64_t v_token, v_head;
  int64_t o_token, o_head;
  int64_t lse_head, lse_token;
  int heads, group;           // Hq and Hq / Hkv
  int window;                 // W, clamped to T by the host
  float scale_log2;           // softmax_scale * log2(e): scores in base 2
};

// The fragment rows of lane `lane` in its warp's 16 rows: row_in_warp(lane, half) for half 0 and 1 (the
// accumulator's c0, c1 and c2, c3).
__device__ __forceinline__ int row_in_warp(int lane, int half) { return lane / 4 + 8 * half; }
// The first of the two adjacent accumulator columns lane `lane` holds in an n8 tile.
__device__ __forceinline__ int col_in_n8(int lane) { return 2 * (lane % 4); }

// Rows [0, Rows) of a [Rows][D] tile from global memory (row stride in elements) into swizzled shared
// memory; rows from `valid` on are zero-filled (never read): past a sequence's end p v must see zeros, not
// the next sequence's values or memory past the tensor.
template <int Rows, int HeadDim>
__device__ __forceinline__ void load_rows(uint32_t tile, const __nv_bfloat16* first_row, int64_t row_stride, int valid) {
  constexpr int kChunks = Shape<HeadDim>::kChunksPerRow;
  static_assert(Rows * kChunks % kThreads == 0, "whole chunks per thread");
#pragma unroll
  for (int step = 0; step < Rows * kChunks / kThreads; ++step) {
    const int i = step * kThreads + static_cast<int>(threadIdx.x);
    const int row = i / kChunks, chunk = i % kChunks;
    const bool inside = row < valid;
    const __nv_bfloat16* src = first_row + (inside ? row * row_stride : 0) + chunk * 8;
    cp_async_16(tile + swizzled_offset<kChunks>(row, chunk), src, inside ? 16 : 0);
  }
}

// Per-thread state of the online softmax for its two rows and its 16 x D / 32 share of the output.
template <int HeadDim>
struct RowState {
  float o[HeadDim / 8][4];  // D / 8 n8 tiles of the output
  float max[2];             // running maximum of the base-2 scores, per half
  float sum[2];             // this thread's share of the running sum of 2^(s - max)
};

// Fragment addresses. Every ldmatrix below reads rows r with r % 8 == lane % 8, so the swizzle term is the
// same for all of a lane's reads: the offset of logical chunk c + 2 i is the offset of chunk c XOR 32 i
// (c < 2; bits 5 and up of the byte offset, below the row's bits at either width: 32 i < D * 2), and 8 rows
// further is 8 row-lengths further. Each lane keeps one offset per operand and derives the rest with an XOR
// and an add.
__device__ __forceinline__ uint32_t chunk_step(uint32_t offset, int pairs) { return offset ^ static_cast<uint32_t>(pairs * 32); }

// S = Q K^T for the warp's 16 rows and the 64 keys of the tile: 8 n8 tiles of fp32.
template <int HeadDim>
__device__ __forceinline__ void scores(float (&s)[kBlockN / 8][4], uint32_t q_tile, uint32_t k_tile, int warp, int lane) {
  using S = Shape<HeadDim>;
  // A fragment of rows 0-15 x columns 0-15: lane l addresses row l % 16 at chunk l / 16 (matrices rows 0-7
  // | 8-15 x columns 0-7 | 8-15). B fragments of keys 0-15: lane l addresses key l % 8 + 8 (l / 16) at
  // chunk (l / 8) % 2: b0, b1 of keys 0-7, then b0, b1 of keys 8-15.
  const uint32_t q_lane = swizzled_offset<S::kChunksPerRow>(warp * 16 + lane % 16, lane / 16);
  const uint32_t k_lane = swizzled_offset<S::kChunksPerRow>(lane % 8 + 8 * (lane / 16), (lane / 8) % 2);
#pragma unroll
  for (int n = 0; n < kBlockN / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < HeadDim / 16; ++kk) {
    uint32_t a[4];
    ldmatrix_x4(a, q_tile + chunk_step(q_lane, kk));
    const uint32_t k_kk = k_tile + chunk_step(k_lane, kk);
#pragma unroll
    for (int nn = 0; nn < kBlockN / 16; ++nn) {
      uint32_t b[4];
      ldmatrix_x4(b, k_kk + nn * 16 * S::kRowBytes);
      mma_bf16(s[2 * nn], a, b[0], b[1]);
      mma_bf16(s[2 * nn + 1], a, b[2], b[3]);
    }
  }
}

// The band mask on an edge tile: -inf where key > query or key < query - W (positions within the sequence).
__device__ __forceinline__ void mask_outside_band(float (&s)[kBlockN / 8][4], int first_query, int first_key, int window,
                                                  int lane) {
#pragma unroll
  for (int n = 0; n < kBlockN / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int query = first_query + row_in_warp(lane, e / 2);
      const int key = first_key + n * 8 + col_in_n8(lane) + e % 2;
      if (hidden(query, key, window)) s[n][e] = -INFINITY;
    }
}

// The online softmax step: new row maxima (over the quad that shares a row), the old output and sums
// rescaled, s replaced by p = 2^(s * scale_log2 - max) in fp32.
template <int HeadDim>
__device__ __forceinline__ void softmax_step(float (&s)[kBlockN / 8][4], RowState<HeadDim>& state, float scale_log2) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int n = 0; n < kBlockN / 8; ++n) tile_max = fmaxf(tile_max, fmaxf(s[n][2 * half], s[n][2 * half + 1]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float new_max = fmaxf(state.max[half], tile_max * scale_log2);
    // A row with no visible key yet keeps max -inf (a tile wholly left of its band, or right of it); subtracting
    // 0 instead keeps its p at 0, not NaN.
    const float base = new_max == -INFINITY ? 0.0f : new_max;
    const float rescale = exp2_approx(state.max[half] - base);
    state.max[half] = new_max;
    state.sum[half] *= rescale;
#pragma unroll
    for (int d = 0; d < HeadDim / 8; ++d) {
      state.o[d][2 * half] *= rescale;
      state.o[d][2 * half + 1] *= rescale;
    }
#pragma unroll
    for (int n = 0; n < kBlockN / 8; ++n) {
      s[n][2 * half] = exp2_approx(fmaf(s[n][2 * half], scale_log2, -base));
      s[n][2 * half + 1] = exp2_approx(fmaf(s[n][2 * half + 1], scale_log2, -base));
      state.sum[half] += s[n][2 * half] + s[n][2 * half + 1];
    }
  }
}

// O += P V: p rounded to bf16 as the A operand straight from the score accumulators (the m16n8 C layout
// of two adjacent n8 tiles is the m16k16 A layout), V through transposed ldmatrix.
template <int HeadDim>
__device__ __forceinline__ void accumulate_pv(const float (&p)[kBlockN / 8][4], RowState<HeadDim>& state, uint32_t v_tile,
                                              int lane) {
  using S = Shape<HeadDim>;
  // B fragments of keys 0-15 x output columns 0-15: lane l addresses key l % 8 + 8 ((l / 8) % 2) at chunk
  // l / 16: b0, b1 of columns 0-7, then b0, b1 of columns 8-15.
  const uint32_t v_lane = swizzled_offset<S::kChunksPerRow>(lane % 8 + 8 * ((lane / 8) % 2), lane / 16);
#pragma unroll
  for (int kk = 0; kk < kBlockN / 16; ++kk) {
    const uint32_t a[4] = {pack_bf16(p[2 * kk][0], p[2 * kk][1]), pack_bf16(p[2 * kk][2], p[2 * kk][3]),
                           pack_bf16(p[2 * kk + 1][0], p[2 * kk + 1][1]), pack_bf16(p[2 * kk + 1][2], p[2 * kk + 1][3])};
    const uint32_t v_kk = v_tile + kk * 16 * S::kRowBytes;
#pragma unroll
    for (int dn = 0; dn < HeadDim / 16; ++dn) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, v_kk + chunk_step(v_lane, dn));
      mma_bf16(state.o[2 * dn], a, b[0], b[1]);
      mma_bf16(state.o[2 * dn + 1], a, b[2], b[3]);
    }
  }
}

// o = O / sum rounded once to bf16, lse = (max + log2(sum)) ln 2, for the rows inside the sequence.
template <int HeadDim>
__device__ __forceinline__ void store_rows(const Params& p, RowState<HeadDim>& state, int64_t first_token, int first_query,
                                           int length, int head, int lane) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = state.sum[half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int query = first_query + row_in_warp(lane, half);
    if (query >= length) continue;
    const int64_t token = first_token + query;
    const float inverse = 1.0f / sum;
    __nv_bfloat16* row = p.o + token * p.o_token + head * p.o_head;
#pragma unroll
    for (int d = 0; d < HeadDim / 8; ++d)
      *reinterpret_cast<uint32_t*>(row + d * 8 + col_in_n8(lane)) =
          pack_bf16(state.o[d][2 * half] * inverse, state.o[d][2 * half + 1] * inverse);
    if (lane % 4 == 0) p.lse[head * p.lse_head + token * p.lse_token] = (state.max[half] + log2f(sum)) * 0.69314718055994531f;
  }
}

// Query tile `work` of head `head`, with `shared` holding Shape<HeadDim>::kSharedBytes.
template <int HeadDim>
__device__ __forceinline__ void run_query_tile(const Params& p, TileWork work, int head, unsigned char* shared) {
  using S = Shape<HeadDim>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t first_token = p.cu_seqlens[work.seq];
  const int length = p.cu_seqlens[work.seq + 1] - static_cast<int>(first_token);
  const int first_row = work.q_tile * kBlockM;
  const int kv_head = head / p.group;
  // The band: key tiles [first_tile, first_tile + tiles).
  const int first_tile = first_key_tile(work.q_tile, p.window, kBlockM, kBlockN);
  const int tiles = band_tiles(work.q_tile, length, p.window, kBlockM, kBlockN);

  const uint32_t q_smem = shared_address(shared);
  const auto k_smem = [&](int stage) { return q_smem + S::kQBytes + stage * S::kKVTileBytes; };
  const auto v_smem = [&](int stage) { return q_smem + S::kQBytes + (kStages + stage) * S::kKVTileBytes; };
  // The n-th tile of the band into ring stage `stage`.
  const auto load_kv = [&](int n, int stage) {
    const int first_key = (first_tile + n) * kBlockN;
    const int valid = length - first_key;
    load_rows<kBlockN, HeadDim>(k_smem(stage), p.k + (first_token + first_key) * p.k_token + kv_head * p.k_head, p.k_token, valid);
    load_rows<kBlockN, HeadDim>(v_smem(stage), p.v + (first_token + first_key) * p.v_token + kv_head * p.v_head, p.v_token, valid);
  };

  // Group n holds the band's n-th tile (and group 0 also Q); a group is committed for every slot, empty past
  // the last tile, so that waiting for all but the newest kStages - 2 groups always means tile n is in.
  load_rows<kBlockM, HeadDim>(q_smem, p.q + (first_token + first_row) * p.q_token + head * p.q_head, p.q_token, length - first_row);
#pragma unroll
  for (int n = 0; n < kStages - 1; ++n) {
    if (n < tiles) load_kv(n, n);
    cp_async_commit();
  }

  RowState<HeadDim> state;
#pragma unroll
  for (int d = 0; d < HeadDim / 8; ++d) state.o[d][0] = state.o[d][1] = state.o[d][2] = state.o[d][3] = 0.0f;
  state.max[0] = state.max[1] = -INFINITY;
  state.sum[0] = state.sum[1] = 0.0f;

  const int warp_first_query = first_row + warp * 16;
  for (int n = 0; n < tiles; ++n) {
    const int stage = n % kStages;
    cp_async_wait<kStages - 2>();
    // Tile n has landed for every thread, and every warp is done with the stage the next load fills (the
    // one tile n - 1 used).
    __syncthreads();
    const int ahead = n + kStages - 1;
    if (ahead < tiles) load_kv(ahead, ahead % kStages);
    cp_async_commit();
    const int key_tile = first_tile + n;
    // A warp whose 16 rows see no key of this tile (all after them, or all left of their band) has nothing
    // to add (warp-uniform: no barrier inside).
    if (!rows_see_tile(warp_first_query, 16, key_tile, p.window, kBlockN)) continue;
    float s[kBlockN / 8][4];
    scores<HeadDim>(s, q_smem, k_smem(stage), warp, lane);
    if (tile_needs_mask(key_tile, work.q_tile, p.window, kBlockM, kBlockN))
      mask_outside_band(s, warp_first_query, key_tile * kBlockN, p.window, lane);
    softmax_step<HeadDim>(s, state, p.scale_log2);
    accumulate_pv<HeadDim>(s, state, v_smem(stage), lane);
  }
  store_rows<HeadDim>(p, state, first_token, warp_first_query, length, head, lane);
}

}  // namespace sliding
