// The split of the small-head path (small_heads.cuh): the batch's pages, sequence after sequence in batch
// order, form one list of `total` pages; CTA c of `ctas` takes the pages [start(c), start(c + 1)) with
// start(c) = floor(c total / ctas), so every CTA gets floor or ceil of total / ctas pages whatever the
// lengths. A CTA's range cuts at most two sequences: the piece at its start and the piece at its end; every
// piece between them is a whole sequence, whose o and lse the CTA writes itself. A cut piece leaves a
// normalized fp32 output and a base-2 LSE in one of two partial slots of its CTA: slot 0 for the range's
// first piece, slot 1 for its last (when that is not also the first). The merge finds a sequence's pieces
// from the page where it starts (page_start, written by CTA 0) and the owner of each page.
//
// Everything here is plain integer arithmetic shared by the kernels and a host check of the plan.
#pragma once

#include <cstdint>

namespace mla {
namespace even {

// The first page of CTA `cta`'s range (the end of the last range when cta == ctas).
__host__ __device__ inline int range_start(int cta, int total, int ctas) {
  return static_cast<int>(static_cast<int64_t>(cta) * total / ctas);
}

// The CTA whose range holds page `page` (0 <= page < total): the largest c with range_start(c) <= page.
// range_start(c) <= page  <=>  c total < (page + 1) ctas  <=>  c <= ((page + 1) ctas - 1) / total.
__host__ __device__ inline int owner(int page, int total, int ctas) {
  return static_cast<int>((static_cast<int64_t>(page + 1) * ctas - 1) / total);
}

// The pieces of a sequence whose pages are [start, end) of the list, in CTA order, as the merge visits them:
// from the owner of its first page, each next CTA the owner of the first page past the range before. A CTA
// with an empty range owns no page and is never visited, so a sequence of a few pages cut among many CTAs
// costs a few steps, not one per CTA between its first and last owner (merge_pieces walked those, with
// three 64-bit divisions each: 27.7 us at TP8 B 2 with 5 pages over 132 CTAs).
struct PieceCtas {
  int start, end, total, ctas;
  int cta, begin;  // the current piece's CTA and where its range starts

  __host__ __device__ PieceCtas(int start_, int end_, int total_, int ctas_)
      : start(start_), end(end_), total(total_), ctas(ctas_), cta(owner(start_, total_, ctas_)), begin(range_start(cta, total_, ctas_)) {}
  // The current piece's partial slot: 0 when it is its range's first (the range starts at or after the
  // sequence's start), else 1 (its last).
  __host__ __device__ int slot() const { return begin < start ? 1 : 0; }
  // To the next piece's CTA; false when the current piece is the sequence's last.
  __host__ __device__ bool advance() {
    const int next = range_start(cta + 1, total, ctas);
    if (next >= end) return false;
    cta = owner(next, total, ctas), begin = next;  // the owner's range starts at `next`: CTAs between are empty
    return true;
  }
};

// Row of the partial outputs [ctas, 2, heads] (each row 512 fp32) and LSEs [ctas, 2, heads].
__host__ __device__ inline int64_t partial_row(int cta, int slot, int head, int heads) {
  return (static_cast<int64_t>(cta) * 2 + slot) * heads + head;
}

__host__ __device__ inline int pages_in(int length) { return length > 0 ? (length + 63) / 64 : 0; }

// One piece of a CTA's range: pages [first, first + count) of sequence b (length tokens).
struct Piece {
  int b, first, count, length;
  int index;   // pieces of the range before this one
  bool whole;  // the whole sequence: o and lse written directly
  int slot;    // else its partial slot
};

// Walks a CTA's range piece by piece, reading the lengths it needs. b and page: where the range starts (the
// sequence holding page range_start(cta) and the page within it), left: the range's page count.
struct Walker {
  const int* lengths;
  int64_t stride;
  int b, page, left, index;

  __host__ __device__ bool next(Piece& piece) {
    while (left > 0) {
      const int length = lengths[static_cast<int64_t>(b) * stride];
      const int pages = pages_in(length);
      const int count = pages - page < left ? pages - page : left;
      if (count <= 0) {  // a sequence without pages (length 0) holds no page of the range
        ++b, page = 0;
        continue;
      }
      piece.b = b, piece.first = page, piece.count = count, piece.length = length, piece.index = index;
      piece.whole = page == 0 && count == pages;
      piece.slot = index == 0 ? 0 : 1;
      left -= count, ++b, page = 0, ++index;
      return true;
    }
    return false;
  }
};

}  // namespace even
}  // namespace mla
