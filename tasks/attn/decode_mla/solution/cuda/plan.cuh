// What the kernels share: the tile constants, the call's parameters, the split of each sequence's pages into
// CTA ranges, and every index computation, each a named function used by host and device alike.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

namespace mla {

constexpr int kPage = 64;     // tokens per page: one tile of keys
constexpr int kWidth = 576;   // a latent row: 512 values (kv_c), then 64 rotary key columns (k_pe)
constexpr int kValues = 512;  // V: the first 512 columns of the same row
constexpr int kRowChunks = kWidth * 2 / 16;  // 72 chunks of 16 bytes a row
constexpr int kTileBytes = kPage * kWidth * 2;  // one page: 72 KB
constexpr int kStages = 2;  // one page in flight while the other is computed (two 72 KB stages fill the SM)
constexpr int kPChunks = kPage * 2 / 16;  // a row of 64 bf16 probabilities: 8 chunks

// A CTA's shape: RowGroups x 16 head rows, ColGroups warps per row group. Warp (r, c) computes the scores of
// rows 16 r .. 16 r + 15 against keys c 64 / ColGroups .., and the output columns c 512 / ColGroups .. of the
// same rows. <4, 2>: 64 heads, 8 warps (128 heads: two head blocks); <1, 8>: 16 heads, 8 warps.
template <int RowGroups, int ColGroups>
struct Shape {
  static constexpr int kRows = 16 * RowGroups;
  static constexpr int kWarps = RowGroups * ColGroups;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kKeys = kPage / ColGroups;      // a warp's keys of S
  static constexpr int kScoreTiles = kKeys / 8;        // its n tiles of S
  static constexpr int kColumns = kValues / ColGroups;  // a warp's columns of O
  static constexpr int kOutTiles = kColumns / 8;       // its n tiles of O
  static constexpr int kQueryBytes = kRows * kWidth * 2;
  static constexpr int kProbBytes = kRows * kPage * 2;
  static constexpr int kExchangeBytes = ColGroups * kRows * 4;  // one float per (warp column, row)
  // Q, the stages, P, the row maxima of the page, the row sums at the end.
  static constexpr int kSharedBytes = kQueryBytes + kStages * kTileBytes + kProbBytes + 2 * kExchangeBytes;
  static_assert(kKeys % 8 == 0 && kOutTiles % 2 == 0, "whole n tiles; O's in pairs");
  static_assert(kScoreTiles == 1 || kScoreTiles % 2 == 0, "S's n tiles one or in pairs");
  static_assert(kSharedBytes <= 227 * 1024, "fits one SM's shared memory");
};

struct Params {
  const __nv_bfloat16* q;
  const __nv_bfloat16* cache;
  const int* block_table;
  const int* seq_lens;
  __nv_bfloat16* o;
  float* lse;
  float* partial_o;    // [B, H, splits, 512] fp32, normalized; used when a sequence has 2 splits or more
  float* partial_lse;  // [B, H, splits] fp32, base 2
  int64_t q_seq, q_head;  // element strides; the last dimension is contiguous everywhere
  int64_t cache_page, cache_token;
  int64_t table_seq, table_page, seq_lens_stride;
  int64_t o_seq, o_head;
  int64_t lse_seq, lse_head;
  int heads, head_blocks;
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

// The split of each sequence's pages, fixed by the shapes and the SM count (so deterministic), one CTA per
// SM: among split counts s, the one that minimizes the waves of CTAs times the pages of a range (in page
// times), plus the partial outputs' traffic (written and read once, fp32) counted in the same page times.
// The table's width MB stands for the longest context: the lengths are never read on the host.
struct SplitPlan {
  int splits = 1, split_pages = 1;
};
inline SplitPlan plan_splits(int64_t batch, int64_t head_blocks, int64_t rows, int64_t table_width, int sms) {
  const int64_t pairs = std::max<int64_t>(1, batch * head_blocks);
  const int64_t width = std::max<int64_t>(1, table_width);
  SplitPlan best;
  double best_cost = 0.0;
  for (int64_t s = 1; s <= std::min<int64_t>(width, 256); ++s) {
    const int64_t pages = ceil_div64(width, s), splits = ceil_div64(width, pages);
    const double waves = static_cast<double>(ceil_div64(pairs * splits, sms));
    const double partial = splits > 1 ? static_cast<double>(pairs * splits * rows * kValues * 8) / (double(sms) * kTileBytes) : 0.0;
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

}  // namespace mla
