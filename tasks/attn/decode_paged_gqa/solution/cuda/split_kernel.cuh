// The attention kernel: one CTA per (sequence, KV head, split of the sequence's pages). The G query heads of
// the KV head are the 16 rows of mma.m16n8k16 (zero rows past G), so each K and V byte is read from DRAM
// once. Each of the 4 warps streams its own pages (one page = 16 keys = one mma N tile pair) through its
// own 3-stage cp.async ring with its own online softmax, so the loop needs no CTA barrier; the 4 warp states
// are merged by LSE in shared memory at the end.
#pragma once

#include <cuda_bf16.h>

#include <cmath>

#include "plan.cuh"
#include "sm80_ops.cuh"

namespace decode {

// Lane-to-row maps of the ldmatrix loads (lane l addresses row l % 8 of matrix l / 8).
// Q as the A operand of k step kk: matrices (rows 0-7 | 8-15) x (chunk 2 kk | 2 kk + 1), a0..a3 in A order.
__device__ __forceinline__ int a_row(int lane) { return ((lane >> 3) & 1) * 8 + (lane & 7); }
__device__ __forceinline__ int a_chunk(int lane, int kk) { return 2 * kk + (lane >> 4); }
// K as the B operand of S = Q K^T, k step kk (dims 16 kk ..): b0, b1 of keys 0-7, then b0, b1 of keys 8-15.
__device__ __forceinline__ int k_row(int lane) { return (lane >> 4) * 8 + (lane & 7); }
__device__ __forceinline__ int k_chunk(int lane, int kk) { return 2 * kk + ((lane >> 3) & 1); }
// V (transposed) as the B operand of O = P V for dims 16 jj ..: b0, b1 of dims 16 jj + 0-7, then of + 8-15.
__device__ __forceinline__ int v_row(int lane) { return ((lane >> 3) & 1) * 8 + (lane & 7); }
__device__ __forceinline__ int v_chunk(int lane, int jj) { return 2 * jj + (lane >> 4); }

// Row and key of element e (0..3) of an m16n8 fp32 accumulator, n tile nt: rows lane / 4 and lane / 4 + 8.
__device__ __forceinline__ int c_row(int lane, int e) { return (lane >> 2) + (e >> 1) * 8; }
__device__ __forceinline__ int c_col(int lane, int nt, int e) { return nt * 8 + (lane & 3) * 2 + (e & 1); }

// The shared memory of one CTA.
struct SharedLayout {
  unsigned char* base;
  __device__ uint32_t query() const { return shared_address(base); }
  __device__ int* pages() const { return reinterpret_cast<int*>(base + kQueryBytes); }
  __device__ unsigned char* warp(int w) const { return base + kQueryBytes + kTableBytes + w * kWarpBytes; }
  __device__ uint32_t k_stage(int w, int stage) const { return shared_address(warp(w) + stage * kStageBytes); }
  __device__ uint32_t v_stage(int w, int stage) const { return k_stage(w, stage) + kTileBytes; }
  __device__ float* state(int w) const { return reinterpret_cast<float*>(warp(w)); }
};

// One warp's online-softmax state over its pages: rows lane / 4 (index 0) and lane / 4 + 8 (index 1).
struct WarpState {
  float o[kHeadDim / 8][4];  // 16 n tiles of 8 dims, unnormalized
  float m[2];                // running maximum of the base-2 scores
  float l[2];                // running sum of 2^(s - m) over this lane's keys (reduced over the quad at the end)
};

// Issue the copies of one page of one KV head, K and V, into a stage: 16 rows x 16 chunks each, 8 chunks
// per lane (a half warp per 256-byte row). Rows past the context's end are zero-filled, never read.
__device__ __forceinline__ void load_page(const Params& p, const SharedLayout& smem, int warp, int stage, int physical,
                                          int kv_head, int rows, int lane) {
  const __nv_bfloat16* k = p.k_cache + physical * p.k_page + kv_head * p.k_head;
  const __nv_bfloat16* v = p.v_cache + physical * p.v_page + kv_head * p.v_head;
  const uint32_t k_dst = smem.k_stage(warp, stage), v_dst = smem.v_stage(warp, stage);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int index = i * 32 + lane, row = index >> 4, chunk = index & 15;
    const int bytes = row < rows ? 16 : 0;
    cp_async_16(k_dst + swizzled_offset(row, chunk), k + row * p.k_token + chunk * 8, bytes);
    cp_async_16(v_dst + swizzled_offset(row, chunk), v + row * p.v_token + chunk * 8, bytes);
  }
}

// One page of 16 keys (the first `rows` valid) from a stage into the warp's state.
__device__ __forceinline__ void attend_page(WarpState& st, const uint32_t (&qa)[8][4], uint32_t k_tile, uint32_t v_tile,
                                            int rows, float scale_log2, int lane) {
  // S = Q K^T: 16 heads x 16 keys, two n tiles.
  float s[2][4] = {};
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    uint32_t kb[4];
    ldmatrix_x4(kb, k_tile + swizzled_offset(k_row(lane), k_chunk(lane, kk)));
    mma_bf16(s[0], qa[kk], kb[0], kb[1]);
    mma_bf16(s[1], qa[kk], kb[2], kb[3]);
  }
  // Base-2 scores, keys past the context at -inf; the maximum of each row over its quad.
  float row_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[nt][e] = c_col(lane, nt, e) < rows ? s[nt][e] * scale_log2 : -INFINITY;
      row_max[e >> 1] = fmaxf(row_max[e >> 1], s[nt][e]);
    }
  float rescale[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    row_max[i] = fmaxf(row_max[i], __shfl_xor_sync(0xffffffffu, row_max[i], 1));
    row_max[i] = fmaxf(row_max[i], __shfl_xor_sync(0xffffffffu, row_max[i], 2));
    // Every page holds at least one key, so the new maximum is finite; the first page rescales by 2^-inf = 0.
    const float next = fmaxf(st.m[i], row_max[i]);
    rescale[i] = exp2_approx(st.m[i] - next);
    st.m[i] = next;
    st.l[i] *= rescale[i];
  }
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[nt][e] = exp2_approx(s[nt][e] - st.m[e >> 1]);
      st.l[e >> 1] += s[nt][e];  // the fp32 p: the sum is not taken over the bf16 operand below
    }
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j) {
    st.o[j][0] *= rescale[0], st.o[j][1] *= rescale[0];
    st.o[j][2] *= rescale[1], st.o[j][3] *= rescale[1];
  }
  // P (bf16) as the A operand: keys 0-7 are n tile 0's accumulators, keys 8-15 n tile 1's.
  const uint32_t pa[4] = {pack_bf16(s[0][0], s[0][1]), pack_bf16(s[0][2], s[0][3]), pack_bf16(s[1][0], s[1][1]),
                          pack_bf16(s[1][2], s[1][3])};
#pragma unroll
  for (int jj = 0; jj < kHeadDim / 16; ++jj) {
    uint32_t vb[4];
    ldmatrix_x4_trans(vb, v_tile + swizzled_offset(v_row(lane), v_chunk(lane, jj)));
    mma_bf16(st.o[2 * jj], pa, vb[0], vb[1]);
    mma_bf16(st.o[2 * jj + 1], pa, vb[2], vb[3]);
  }
}

// The warp's state to its shared-memory slot (its ring, drained): o rows, then m and l per row.
__device__ __forceinline__ void store_state(WarpState& st, float* slot, int lane) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    st.l[i] += __shfl_xor_sync(0xffffffffu, st.l[i], 1);
    st.l[i] += __shfl_xor_sync(0xffffffffu, st.l[i], 2);
  }
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) slot[c_row(lane, e) * kStateStride + c_col(lane, j, e)] = st.o[j][e];
  if ((lane & 3) == 0)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      slot[kRows * kStateStride + c_row(lane, 2 * i)] = st.m[i];
      slot[kRows * kStateStride + kRows + c_row(lane, 2 * i)] = st.l[i];
    }
}

__global__ void __launch_bounds__(kThreads, kCtasPerSm) split_attention(Params p) {
  extern __shared__ __align__(128) unsigned char shared[];
  const SharedLayout smem{shared};
  const int b = static_cast<int>(blockIdx.x) / p.kv_heads, kv_head = static_cast<int>(blockIdx.x) % p.kv_heads;
  const int split = static_cast<int>(blockIdx.y);
  const int length = p.seq_lens[b * p.seq_lens_stride];
  const int first = split * p.split_pages, pages = pages_of(length);
  if (first >= pages) return;  // a short sequence uses fewer splits
  const int count = min(p.split_pages, pages - first);
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31;

  // The G query rows (zero rows up to 16) and the range's page numbers, staged once.
  for (int index = tid; index < kRows * 16; index += kThreads) {
    const int row = index >> 4, chunk = index & 15;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (row < p.group)
      value = *reinterpret_cast<const uint4*>(p.q + b * p.q_seq + query_head(kv_head, row, p.group) * p.q_head + chunk * 8);
    *reinterpret_cast<uint4*>(shared + swizzled_offset(row, chunk)) = value;
  }
  for (int i = tid; i < count; i += kThreads) smem.pages()[i] = p.block_table[b * p.table_seq + (first + i) * p.table_page];
  __syncthreads();

  uint32_t qa[kHeadDim / 16][4];
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) ldmatrix_x4(qa[kk], smem.query() + swizzled_offset(a_row(lane), a_chunk(lane, kk)));

  WarpState st;
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j) st.o[j][0] = st.o[j][1] = st.o[j][2] = st.o[j][3] = 0.0f;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.0f;

  // The warp's pages: local i = warp + 4 n of the range, logical page first + i.
  const int mine = count > warp ? ceil_div(count - warp, kWarps) : 0;
  const auto issue = [&](int n) {
    const int local = warp + n * kWarps, logical = first + local;
    load_page(p, smem, warp, n % kStages, smem.pages()[local], kv_head, valid_rows(logical, length), lane);
  };
#pragma unroll
  for (int n = 0; n < kStages - 1; ++n) {
    if (n < mine) issue(n);
    cp_async_commit();  // empty groups too: the wait below counts groups
  }
  for (int n = 0; n < mine; ++n) {
    // The stage refilled here held page n - 1, read by every lane before the __syncwarp that ended it.
    if (n + kStages - 1 < mine) issue(n + kStages - 1);
    cp_async_commit();
    cp_async_wait<kStages - 1>();  // this lane's copies of page n have landed
    __syncwarp();                  // and every other lane's
    const int logical = first + warp + n * kWarps;
    attend_page(st, qa, smem.k_stage(warp, n % kStages), smem.v_stage(warp, n % kStages), valid_rows(logical, length),
                p.scale_log2, lane);
    __syncwarp();
  }
  cp_async_wait<0>();
  __syncwarp();
  store_state(st, smem.state(warp), lane);
  __syncthreads();

  // Merge the 4 warp states of each row; thread tid owns dim tid. A warp without pages has m = -inf, l = 0.
  const bool alone = splits_used(length, p.split_pages) == 1;
  for (int row = 0; row < p.group; ++row) {
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, smem.state(w)[kRows * kStateStride + row]);
    float sum = 0.0f, acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float* slot = smem.state(w);
      const float weight = exp2_approx(slot[kRows * kStateStride + row] - m);
      sum += weight * slot[kRows * kStateStride + kRows + row];
      acc += weight * slot[row * kStateStride + tid];
    }
    const int h = query_head(kv_head, row, p.group);
    const float lse2 = m + __log2f(sum);
    if (alone) {
      p.o[b * p.o_seq + h * p.o_head + tid] = __float2bfloat16_rn(acc / sum);
      if (tid == 0) p.lse[h * p.lse_head + b * p.lse_seq] = lse2 * 0.6931471805599453f;
    } else {
      const int64_t at = partial_index(b, h, split, p.heads, p.splits);
      p.partial_o[at * kHeadDim + tid] = acc / sum;
      if (tid == 0) p.partial_lse[at] = lse2;
    }
  }
}

}  // namespace decode
