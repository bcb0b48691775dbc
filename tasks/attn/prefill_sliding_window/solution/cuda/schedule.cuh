// Which query tile each CTA computes, longest first (attn/prefill_causal_gqa's schedule, its cost the
// band's): query tile m of a sequence reads band_tiles key tiles, about (W + BM) / BN once the band is full
// (33 at Mistral's W 4095 with BN 128, 4 at gpt-oss's W 127 with BN 64), fewer for the first tiles of each
// sequence (whose band is cut by the sequence's start) and for sequences shorter than the window (causal
// there, growing along the sequence). One small kernel reads cu_seqlens on the device (no host round trip),
// lists every (sequence, query tile), and sorts the list by descending cost into the workspace; CTA x of the
// attention kernel then takes entry x / Hq of the list and query head x % Hq, so that the G heads sharing a
// KV head run side by side and read its tiles through L2 once.
#pragma once

#include <cstdint>

#include "band.cuh"

namespace sliding {

constexpr int kScheduleThreads = 1024;

// One query tile of one sequence.
struct TileWork {
  int seq;     // index into cu_seqlens
  int q_tile;  // query rows [q_tile * BM, (q_tile + 1) * BM) of the sequence
};

// The workspace: the tile count, the sorted list, and scratch for the sort.
struct ScheduleView {
  int* count;          // [1] tiles listed
  TileWork* order;     // [bound] the tiles, most key tiles first
  TileWork* listing;   // [bound] the tiles in cu_seqlens order
  int* cost;           // [bound] key tiles of each listed tile
  int* first_tile;     // [B + 1] each sequence's first tile in the listing
  int bound;           // ceil(T / BM) + B: no batch of T tokens in B sequences has more tiles
};

template <int BlockM, int BlockN>
__global__ void __launch_bounds__(kScheduleThreads) schedule_tiles(const int* __restrict__ cu_seqlens, int batch,
                                                                  int window, ScheduleView view) {
  __shared__ int total;
  if (threadIdx.x == 0) {
    int tiles = 0;
    for (int b = 0; b < batch; ++b) {
      view.first_tile[b] = tiles;
      const int length = cu_seqlens[b + 1] - cu_seqlens[b];
      tiles += length > 0 ? query_tiles(length, BlockM) : 0;
    }
    view.first_tile[batch] = tiles;
    total = tiles < view.bound ? tiles : view.bound;
    *view.count = total;
  }
  __syncthreads();
  const int tiles = total;
  // Each tile's sequence (the last whose first tile is at or before it) and cost.
  for (int i = threadIdx.x; i < tiles; i += kScheduleThreads) {
    int low = 0, high = batch - 1;
    while (low < high) {
      const int mid = (low + high + 1) / 2;
      if (view.first_tile[mid] <= i) low = mid; else high = mid - 1;
    }
    const int q_tile = i - view.first_tile[low];
    view.listing[i] = TileWork{low, q_tile};
    view.cost[i] = band_tiles(q_tile, cu_seqlens[low + 1] - cu_seqlens[low], window, BlockM, BlockN);
  }
  __syncthreads();
  // Rank by descending cost, ties in listing order: a stable sort, so the schedule is deterministic.
  // Quadratic in the tiles, which are few (ceil(T / BM) + B).
  for (int i = threadIdx.x; i < tiles; i += kScheduleThreads) {
    const int c = view.cost[i];
    int rank = 0;
    for (int j = 0; j < tiles; ++j) {
      const int other = view.cost[j];
      rank += other > c || (other == c && j < i);
    }
    view.order[rank] = view.listing[i];
  }
}

}  // namespace sliding
