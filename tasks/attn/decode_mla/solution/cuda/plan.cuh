// What the kernels share: the tile constants, the call's parameters, the split of each sequence's pages into
// CTA ranges, every index computation used by host and device alike, and the two arithmetic helpers.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

namespace mla {

constexpr int kPage = 64;     // tokens per page: one tile of keys
constexpr int kWidth = 576;   // a latent row: 512 values (kv_c), then 64 rotary key columns (k_pe)
constexpr int kValues = 512;  // V: the first 512 columns of the same row
constexpr int kTileBytes = kPage * kWidth * 2;  // one page: 72 KB
constexpr int kStages = 2;  // pages in shared memory: one computed while the next lands (Q and two fill the SM)

// The call's parameters that are not TMA descriptors: what the attention kernel's consumers and the merge use.
struct Params {
  const int* block_table;
  const int* seq_lens;
  __nv_bfloat16* o;
  float* lse;
  float* partial_o;    // [B, H, splits, 512] fp32, normalized; used when a sequence has 2 splits or more
  float* partial_lse;  // [B, H, splits] fp32, base 2
  int64_t table_seq, table_page, seq_lens_stride;  // element strides
  int64_t o_seq, o_head;                           // o's last dimension is contiguous
  int64_t lse_seq, lse_head;
  int heads;                // H
  int rows;                 // heads per CTA: 64, or 16 when H is not a multiple of 64
  int head_blocks;          // H / rows; grid x = B head_blocks
  int splits, split_pages;  // every sequence's pages cut into ranges of split_pages; grid y = splits
  float scale_log2;         // softmax_scale * log2(e): scores in base 2
};

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
__host__ __device__ constexpr int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Pages a context of `length` tokens fills; the last one holds length - 64 (pages - 1) tokens.
__host__ __device__ inline int pages_of(int length) { return ceil_div(length, kPage); }

// Rows of logical page `page` that hold keys of a context of `length` tokens (64 but on the last page).
__device__ inline int valid_rows(int page, int length) { return min(kPage, length - page * kPage); }

// The splits a sequence of `length` tokens uses: ranges [s split_pages, (s + 1) split_pages) that hold a
// page. A sequence with one writes o and lse directly; with more, the merge kernel combines them.
__host__ __device__ inline int splits_used(int length, int split_pages) { return ceil_div(pages_of(length), split_pages); }

// A split's partial row: sequence b, head h, split s of `splits`.
__host__ __device__ inline int64_t partial_index(int b, int h, int s, int heads, int splits) {
  return (static_cast<int64_t>(b) * heads + h) * splits + s;
}

// The split of each sequence's pages, fixed by the shapes and the device (so deterministic): `slots` CTAs
// run at once (one per SM, counted in whole clusters). Among split counts s, the one that minimizes the
// waves of CTAs times the pages of a range (in page times), plus the partial outputs' traffic (written and
// read once, fp32) counted in the same page times. The table's width MB stands for the longest context:
// the lengths are never read on the host.
struct SplitPlan {
  int splits = 1, split_pages = 1;
};
inline SplitPlan plan_splits(int64_t batch, int64_t head_blocks, int64_t rows, int64_t table_width, int slots) {
  const int64_t ctas = std::max<int64_t>(1, batch * head_blocks);
  const int64_t width = std::max<int64_t>(1, table_width);
  SplitPlan best;
  double best_cost = 0.0;
  for (int64_t s = 1; s <= std::min<int64_t>(width, 256); ++s) {
    const int64_t pages = ceil_div64(width, s), splits = ceil_div64(width, pages);
    const double waves = static_cast<double>(ceil_div64(ctas * splits, slots));
    const double partial = splits > 1 ? static_cast<double>(ctas * splits * rows * kValues * 8) / (double(slots) * kTileBytes) : 0.0;
    const double cost = waves * static_cast<double>(pages) + partial;
    if (s == 1 || cost < best_cost) best_cost = cost, best.splits = static_cast<int>(splits), best.split_pages = static_cast<int>(pages);
  }
  return best;
}

inline size_t partial_bytes(int64_t batch, int64_t heads, const SplitPlan& plan) {
  if (plan.splits <= 1) return 0;
  const int64_t rows = batch * heads * plan.splits;
  return static_cast<size_t>(rows * kValues * 4 + rows * 4);
}

// Two floats rounded to nearest even bf16, the first in the low half (the lower column).
__device__ __forceinline__ uint32_t pack_bf16(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

// 2^x by the special function unit (relative error about 2^-22); 2^-inf = 0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace mla
