// The band's index arithmetic, in one place and in small named functions (host and device), so that the
// edge tiles can be reasoned through by hand: the worked cases below. Positions are within the sequence;
// query tile m holds rows [m BM, (m + 1) BM), key tile n keys [n BN, (n + 1) BN).
//
// Query i sees keys max(0, i - W) .. i. A query tile sees the union over its rows: keys from its first
// row's left edge, first_row - W, to its last row (or the sequence's end). Inside that range two kinds of
// key tile need the element mask, the others are fully visible to every row of the query tile:
// - the diagonal: a tile holding a key after the query tile's first row (key > query for some row);
// - the window's left edge: a tile holding a key more than W before the query tile's last row.
// With BM = 128, BN = 64 and W >= 190 that is two diagonal tiles and two or three edge tiles of the
// W / 64 + 2 or 3 the query tile reads; with W < 64 every tile read is an edge tile (the band is narrower
// than a tile), which is correct, only slower than it needs to be.
//
// Worked case, W = 5 (smaller than a tile), query tile 1 (rows 128..255) of a 300-token sequence:
// first_key_tile = (128 - 5) / 64 = 1, end_key_tile = ceil(256 / 64) = 4: key tiles 1, 2, 3 (keys 64..255).
// Tile 1 (keys 64..127): its first key 64 < 255 - 5, masked; row 128 sees its keys 123..127, the rows from
// 133 on none of them. Tile 2 (128..191) and tile 3 (192..255): last key > 128, masked. Warp 0 (rows
// 128..143) skips tile 3: its first key 192 > 143. Warp 7 (rows 240..255) skips tile 1: its last key 127 <
// 240 - 5. Row 255 sees 250..255, all in tile 3. Query tile 2 of the same sequence (rows 256..299, 44 of
// them): first_key_tile = 251 / 64 = 3, end_key_tile = ceil(300 / 64) = 5: tiles 3 and 4, keys 192..299 (the
// rows of tile 4 past 299 are zero-filled and every row that is stored sees none of them: key > query).
//
// W = 0: every row sees itself alone; first_key_tile = first_row / BN, the diagonal tiles only. W >= the
// sequence's length: first_key_tile = 0 and no tile is a left-edge tile (last_row - W < 0): the causal
// kernel's loop exactly. The host clamps W to T so that no expression here overflows.
#pragma once

namespace sliding {

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Query tiles of a sequence of `length` tokens.
__host__ __device__ constexpr int query_tiles(int length, int block_m) { return ceil_div(length, block_m); }

// The first key tile query tile `q_tile` reads: the one holding its first row's leftmost visible key.
__host__ __device__ constexpr int first_key_tile(int q_tile, int window, int block_m, int block_n) {
  const int leftmost = q_tile * block_m - window;
  return leftmost > 0 ? leftmost / block_n : 0;
}

// One past the last key tile it reads: keys up to its last row, or the sequence's end.
__host__ __device__ constexpr int end_key_tile(int q_tile, int length, int block_m, int block_n) {
  const int rows_end = (q_tile + 1) * block_m < length ? (q_tile + 1) * block_m : length;
  return ceil_div(rows_end, block_n);
}

// Key tiles it reads: O(W / BN), not O(L / BN).
__host__ __device__ constexpr int band_tiles(int q_tile, int length, int window, int block_m, int block_n) {
  return end_key_tile(q_tile, length, block_m, block_n) - first_key_tile(q_tile, window, block_m, block_n);
}

// Whether key tile `key_tile` holds a key hidden from some row of query tile `q_tile`: a key after its
// first row (the diagonal), or a key more than W before its last row (the window's left edge). Rows past
// the sequence's end count as rows here: masking a tile more than needed is only slower.
__host__ __device__ constexpr bool tile_needs_mask(int key_tile, int q_tile, int window, int block_m, int block_n) {
  const int first_row = q_tile * block_m, last_row = first_row + block_m - 1;
  const int first_key = key_tile * block_n, last_key = first_key + block_n - 1;
  return last_key > first_row || first_key < last_row - window;
}

// Whether any of `rows` consecutive queries from `first_query` sees a key of key tile `key_tile`: false
// when every key is after the last of them, or more than W before the first of them. Warp-uniform when the
// arguments are: a warp that sees none of a tile skips its math.
__host__ __device__ constexpr bool rows_see_tile(int first_query, int rows, int key_tile, int window, int block_n) {
  const int first_key = key_tile * block_n, last_key = first_key + block_n - 1;
  return first_key <= first_query + rows - 1 && last_key >= first_query - window;
}

// Key `key` is hidden from query `query`: after it, or more than W before it.
__host__ __device__ constexpr bool hidden(int query, int key, int window) { return key > query || key < query - window; }

}  // namespace sliding
