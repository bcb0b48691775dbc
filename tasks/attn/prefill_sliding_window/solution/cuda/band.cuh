// The band's index arithmetic, in one place and in small named functions (host and device), so that the
// edge tiles can be reasoned through by hand and checked by brute force. Positions are within the sequence;
// query tile m holds rows [m BM, (m + 1) BM), key tile n keys [n BN, (n + 1) BN).
//
// Query i sees keys max(0, i - W) .. i. A run of consecutive rows [r0, r0 + R) (a query tile, or one
// consumer warpgroup's 64 rows of it) sees the union over its rows: keys from its first row's left edge,
// r0 - W, to its last row (or the sequence's last token). Inside that range two kinds of key tile need the
// element mask; every other tile is visible to every one of the R rows:
// - the diagonal: a tile holding a key after the first row (key > query for some row), tiles n >=
//   diagonal_tile(r0) = (r0 + 1) / BN;
// - the window's left edge: a tile holding a key more than W before the last row (key < query - W for some
//   row), tiles n < edge_end_tile(r0, R) = ceil((r0 + R - 1 - W) / BN) (none when that is <= 0).
// Rows past the sequence's end count as rows here: masking a tile more than needed is only slower.
//
// The kernel (hopper_band.cuh) reads the query tile's range [first_key_tile, end_key_tile) from its top
// (the diagonal) down; each consumer warpgroup computes only its own rows' range [rows_first_tile,
// rows_last_tile] of it and masks only its own edge tiles. The first tile a warpgroup computes is its last,
// which holds every one of its rows' own key (every row of the warpgroup that is inside the sequence): each
// row has a finite maximum from its first tile on, and a later tile whose keys a row cannot see (its left
// edge) leaves that maximum as it is (rescale 2^0 = 1, p = 2^-inf = 0).
//
// Worked case, D 128 (BM = BN = 128), Mistral's W = 4095, query tile m >= 32 (rows 128m .. 128m + 127):
// first_key_tile = (128m - 4095) / 128 = m - 32, end_key_tile = m + 1: 33 tiles. Warpgroup 0 (rows 128m ..
// 128m + 63): rows_first_tile = m - 32, rows_last_tile = m, diagonal_tile = m, edge_end_tile = ceil((128m +
// 63 - 4095) / 128) = m - 31: tile m masked, m - 1 .. m - 31 not, m - 32 masked. Warpgroup 1 (rows 128m + 64
// ..): rows_first_tile = (128m - 4031) / 128 = m - 32, edge_end_tile = ceil((128m - 3968) / 128) = m - 31:
// the same. 31 of the 33 tiles take no compare.
//
// Worked case, D 64 (BM = 128, BN = 64), gpt-oss's W = 127, query tile m >= 1: first_key_tile = (128m -
// 127) / 64 = 2m - 2, end_key_tile = 2m + 2: the producer loads tiles 2m + 1 .. 2m - 2. Warpgroup 0 (rows
// 128m .. 128m + 63) computes 2m .. 2m - 2 (tile 2m + 1, keys after all its rows, is skipped): 2m is its
// diagonal, 2m - 1 (keys 128m - 64 .. 128m - 1) is visible to all its rows (128m + 63 - 127 = 128m - 64), 2m
// - 2 is its left edge. Warpgroup 1 (rows 128m + 64 .. 128m + 127) computes 2m + 1 .. 2m - 1 (tile 2m - 2,
// keys more than 127 before all its rows, is skipped): 2m + 1 diagonal, 2m visible, 2m - 1 left edge.
//
// W = 0: every row sees itself alone; each warpgroup computes the one tile holding its rows. W >= the
// sequence's length: first tile 0, no left-edge tile (r0 + R - 1 - W < 0): the causal loop exactly. The host
// clamps W to T so that no expression here overflows.
#pragma once

namespace sliding {

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Query tiles of a sequence of `length` tokens.
__host__ __device__ constexpr int query_tiles(int length, int block_m) { return ceil_div(length, block_m); }

// The first key tile rows [r0, ...) need: the one holding the first row's leftmost visible key.
__host__ __device__ constexpr int rows_first_tile(int r0, int window, int block_n) {
  return r0 > window ? (r0 - window) / block_n : 0;
}

// The last key tile rows [r0, r0 + rows) need: the one holding the last of them inside the sequence
// (r0 < length).
__host__ __device__ constexpr int rows_last_tile(int r0, int rows, int length, int block_n) {
  return ((r0 + rows < length ? r0 + rows : length) - 1) / block_n;
}

// The first key tile holding a key after row r0: from there up, the diagonal's mask.
__host__ __device__ constexpr int diagonal_tile(int r0, int block_n) { return (r0 + 1) / block_n; }

// One past the last key tile holding a key more than W before row r0 + rows - 1: below it, the left
// edge's mask.
__host__ __device__ constexpr int edge_end_tile(int r0, int rows, int window, int block_n) {
  return r0 + rows - 1 - window > 0 ? ceil_div(r0 + rows - 1 - window, block_n) : 0;
}

// The key tiles query tile `q_tile` reads: [first_key_tile, end_key_tile).
__host__ __device__ constexpr int first_key_tile(int q_tile, int window, int block_m, int block_n) {
  return rows_first_tile(q_tile * block_m, window, block_n);
}
__host__ __device__ constexpr int end_key_tile(int q_tile, int length, int block_m, int block_n) {
  return rows_last_tile(q_tile * block_m, block_m, length, block_n) + 1;
}

// How many: O(W / BN), not O(L / BN). The schedule's cost.
__host__ __device__ constexpr int band_tiles(int q_tile, int length, int window, int block_m, int block_n) {
  return end_key_tile(q_tile, length, block_m, block_n) - first_key_tile(q_tile, window, block_m, block_n);
}

// Key `key` is hidden from query `query`: after it, or more than W before it.
__host__ __device__ constexpr bool hidden(int query, int key, int window) { return key > query || key < query - window; }

}  // namespace sliding
