// What the paged-cache decode tasks (attn/decode_paged_gqa, attn/decode_mla) draw alike: the batch's
// sequence lengths and a serving system's block table over a shared page pool.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "core/task.hpp"

namespace d2k {

// B lengths from Lmin to Lmax, Lmin + floor(b (Lmax - Lmin) / (B - 1)), checked against the workload's
// N (tokens), P (pages of `page` tokens used), NB (pages in the cache) and MB (the block table's width);
// a mismatch names the task, the workload and the axis.
std::vector<int64_t> paged_lengths(const Task& task, const Workload& workload, int64_t page);

// block_table [B, MB] int32 and seq_lens [B] int32: the lengths in a random order, every used page
// distinct and at a random place of the `blocks` pages, the unused entries of each row random page
// numbers (a reused row of a serving system's table holds stale ones).
struct PagedTable {
  at::Tensor block_table;
  at::Tensor seq_lens;
};
PagedTable draw_paged_table(const std::vector<int64_t>& lengths, int64_t blocks, int64_t width, int64_t page,
                            at::Generator& gen);

}  // namespace d2k
