// What the two kernels share: the tile constants, the call's parameters, the split of each sequence's pages
// into CTA ranges, and every index computation, each in a named function used by both host and device.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

namespace decode {

constexpr int kHeadDim = 128;
constexpr int kPage = 16;          // tokens per page: one warp's tile of keys
constexpr int kRows = 16;          // the M of mma.m16n8k16: a KV head's G <= 16 query heads, the rest zero
constexpr int kWarps = 4;          // each streams its own pages: warp w takes the CTA's pages w, w + 4, ...
constexpr int kThreads = kWarps * 32;
constexpr int kStages = 3;         // pages per warp in shared memory: two in flight while one is computed
constexpr int kCtasPerSm = 2;      // what the shared memory below allows (2 x 102 KB)
constexpr int kMaxSplitPages = 512;  // a CTA's page numbers are staged in shared memory: 2 KB
constexpr int kMinSplitPages = 16;   // four pages a warp at least: a shorter range is mostly pipeline fill

constexpr int kTileBytes = kPage * kHeadDim * 2;       // one page of one KV head, K or V: 4 KB
constexpr int kStageBytes = 2 * kTileBytes;            // K and V
constexpr int kWarpBytes = kStages * kStageBytes;      // a warp's ring: 24 KB
constexpr int kQueryBytes = kRows * kHeadDim * 2;      // the G query rows, zero-padded to 16: 4 KB
constexpr int kTableBytes = kMaxSplitPages * 4;
constexpr int kSharedBytes = kQueryBytes + kTableBytes + kWarps * kWarpBytes;
// A warp's partial state after its loop, in its own ring: o [16][kStateStride] fp32, then m and l [16].
constexpr int kStateStride = kHeadDim + 8;  // +8 floats: rows in different banks for the fragment stores
static_assert(kThreads == kHeadDim, "the merges give each thread one dim");
static_assert((kRows * kStateStride + 2 * kRows) * 4 <= kWarpBytes, "a warp's state fits in its ring");

struct Params {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k_cache;
  const __nv_bfloat16* v_cache;
  const int* block_table;
  const int* seq_lens;
  __nv_bfloat16* o;
  float* lse;
  float* partial_o;    // [B, Hq, splits, 128] fp32, normalized; used when a sequence has 2 splits or more
  float* partial_lse;  // [B, Hq, splits] fp32, base 2
  int64_t q_seq, q_head;                     // element strides; the head dim is contiguous everywhere
  int64_t k_page, k_token, k_head;
  int64_t v_page, v_token, v_head;
  int64_t table_seq, table_page, seq_lens_stride;
  int64_t o_seq, o_head;
  int64_t lse_head, lse_seq;
  int heads, kv_heads, group;
  int splits, split_pages;  // every sequence's pages cut into ranges of split_pages; grid y = splits
  float scale_log2;         // softmax_scale * log2(e): scores in base 2
};

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
__host__ __device__ constexpr int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Pages a context of `length` tokens fills; the last one holds length - 16 (pages - 1) tokens.
__host__ __device__ inline int pages_of(int length) { return ceil_div(length, kPage); }

// Rows of logical page `page` that hold keys of a context of `length` tokens (16 but on the last page).
__device__ inline int valid_rows(int page, int length) { return min(kPage, length - page * kPage); }

// The splits a sequence of `length` tokens uses: ranges [s split_pages, (s + 1) split_pages) that hold a
// page. A sequence with one writes o and lse directly; with more, the merge kernel combines them.
__host__ __device__ inline int splits_used(int length, int split_pages) { return ceil_div(pages_of(length), split_pages); }

// Query head of row r (< G) of KV head g: the G heads g G .. g G + G - 1 share it (FlashAttention's h / G).
__host__ __device__ inline int query_head(int kv_head, int row, int group) { return kv_head * group + row; }

// A split's partial row: sequence b, query head h, split s of `splits`.
__host__ __device__ inline int64_t partial_index(int b, int h, int s, int heads, int splits) {
  return (static_cast<int64_t>(b) * heads + h) * splits + s;
}

// The split of each sequence's pages, fixed by the shapes and the SM count (so deterministic): enough CTAs
// for about two waves at kCtasPerSm (a wave of B Hkv CTAs at B 1 would use 8 of 132 SMs), ranges of at
// least kMinSplitPages and at most kMaxSplitPages pages of the table's width, MB.
struct SplitPlan {
  int splits = 1, split_pages = 1;
};
inline SplitPlan plan_splits(int64_t batch, int64_t kv_heads, int64_t table_width, int sms) {
  const int64_t pairs = std::max<int64_t>(1, batch * kv_heads);
  const int64_t wanted = 2 * int64_t{sms} * kCtasPerSm;
  const int64_t most = std::max<int64_t>(1, ceil_div64(table_width, kMinSplitPages));
  const int64_t splits = std::clamp<int64_t>(ceil_div64(wanted, pairs), 1, most);
  const int64_t split_pages = std::min<int64_t>(ceil_div64(table_width, splits), kMaxSplitPages);
  SplitPlan plan;
  plan.split_pages = static_cast<int>(std::max<int64_t>(1, split_pages));
  plan.splits = static_cast<int>(ceil_div64(table_width, plan.split_pages));
  return plan;
}

inline size_t partial_bytes(int64_t batch, int64_t heads, const SplitPlan& plan) {
  if (plan.splits <= 1) return 0;
  const int64_t rows = batch * heads * plan.splits;
  return static_cast<size_t>(rows * kHeadDim * 4 + rows * 4);
}

}  // namespace decode
