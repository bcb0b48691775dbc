// The split of attn/decode_mla's 16-head path (tasks/attn/decode_mla/solution/cuda/even_split.cuh), run on the
// host: every CTA's range walked as attend_small walks it, every cut sequence's pieces as merge_pieces finds
// them. Checked on random batches (lengths with zeros, single pages, long sequences) and CTA counts 1..264:
// - the ranges' pieces cover every page of every sequence exactly once, in order;
// - a piece is `whole` exactly when it covers its sequence, so the sequences merge_pieces skips (one owner
//   of the first and last page) are written by their one piece, and no other;
// - for a cut sequence, even::PieceCtas visits exactly the CTAs that hold its pieces, in CTA order, with the
//   partial slot each of them wrote (the Walker's: 0 for its range's first piece, else 1), and a CTA's two
//   slots are never the same sequence's;
// - the walk of merge_pieces takes as many steps as the sequence has pieces (the cost it was written for).
// Exit 0 when all hold; a message naming the batch, CTA count and sequence otherwise.
//
// Built and run by ctest (host_emulation.DecodeMlaEvenSplitPiecesCoverEveryPageOnce); by hand:
//   g++ -std=c++20 -O1 -Itasks/attn/decode_mla/solution/cuda tests/host_emulation/decode_mla_even_split.cpp
#define __host__
#define __device__
#include "even_split.cuh"

#include <cstdio>
#include <random>
#include <vector>

namespace {

using mla::even::owner;
using mla::even::pages_in;
using mla::even::range_start;

int failures = 0;

void fail(const char* what, int batch, int ctas, int b, int detail) {
  if (++failures <= 20) std::printf("FAIL: %s (batch %d, ctas %d, sequence %d, detail %d)\n", what, batch, ctas, b, detail);
}

struct Cut {
  int cta, slot;
};

void check(const std::vector<int>& lengths, int ctas) {
  const int batch = static_cast<int>(lengths.size());
  std::vector<int> page_start(batch + 1, 0);
  for (int b = 0; b < batch; ++b) page_start[b + 1] = page_start[b] + pages_in(lengths[b]);
  const int total = page_start[batch];
  if (total == 0) return;  // the kernel's ranges are all empty; the merge returns for every sequence

  std::vector<int> covered(total, 0);
  std::vector<std::vector<Cut>> cuts(batch);
  std::vector<int> wholes(batch, 0);
  for (int cta = 0; cta < ctas; ++cta) {
    const int first = range_start(cta, total, ctas), end = range_start(cta + 1, total, ctas);
    // Where the range starts, as locate finds it: the sequence with pages holding page `first`.
    int start_b = batch, start_page = 0;
    for (int b = 0; b < batch; ++b)
      if (page_start[b] <= first && first < page_start[b + 1]) {
        start_b = b, start_page = first - page_start[b];
        break;
      }
    if ((start_b == batch) != (first == total)) fail("a range before the end has no start, or one at the end has", batch, ctas, start_b, cta);
    mla::even::Walker walk{lengths.data(), 1, start_b, start_page, end - first, 0};
    mla::even::Piece piece;
    int next_page = first, cut_slots = 0, last_cut_b = -1;
    while (walk.next(piece)) {
      const int at = page_start[piece.b] + piece.first;
      if (at != next_page) fail("a range's pieces are not contiguous", batch, ctas, piece.b, cta);
      for (int n = 0; n < piece.count; ++n) ++covered[at + n];
      next_page = at + piece.count;
      const bool covers = piece.first == 0 && piece.count == pages_in(lengths[piece.b]);
      if (piece.whole != covers) fail("whole is not 'covers the sequence'", batch, ctas, piece.b, cta);
      if (piece.whole) {
        ++wholes[piece.b];
      } else {
        if (piece.slot != (piece.index == 0 ? 0 : 1)) fail("a cut piece's slot", batch, ctas, piece.b, cta);
        if (piece.b == last_cut_b) fail("two slots of one CTA for one sequence", batch, ctas, piece.b, cta);
        last_cut_b = piece.b;
        ++cut_slots;
        cuts[piece.b].push_back({cta, piece.slot});
      }
    }
    if (next_page != end) fail("a range's pieces end before the range", batch, ctas, -1, cta);
    if (cut_slots > 2) fail("more than two cut pieces in a range", batch, ctas, -1, cta);
  }
  for (int page = 0; page < total; ++page)
    if (covered[page] != 1) fail("a page not covered exactly once", batch, ctas, -1, page);

  for (int b = 0; b < batch; ++b) {
    const int start = page_start[b], end = page_start[b + 1];
    if (end <= start) {
      if (wholes[b] != 0 || !cuts[b].empty()) fail("a sequence without pages has a piece", batch, ctas, b, 0);
      continue;
    }
    const bool one_owner = owner(start, total, ctas) == owner(end - 1, total, ctas);
    if (one_owner != (wholes[b] == 1)) fail("merge_pieces's skip disagrees with the whole piece", batch, ctas, b, wholes[b]);
    if (one_owner) {
      if (!cuts[b].empty()) fail("a sequence written whole also has cut pieces", batch, ctas, b, 0);
      continue;
    }
    if (cuts[b].size() < 2) fail("a cut sequence with fewer than two pieces", batch, ctas, b, static_cast<int>(cuts[b].size()));
    std::size_t step = 0;
    for (mla::even::PieceCtas piece(start, end, total, ctas);; ++step) {
      if (step >= cuts[b].size()) {
        fail("the merge visits more pieces than were written", batch, ctas, b, piece.cta);
        break;
      }
      if (piece.cta != cuts[b][step].cta) fail("the merge visits another CTA", batch, ctas, b, piece.cta);
      if (piece.slot() != cuts[b][step].slot) fail("the merge reads another slot", batch, ctas, b, piece.cta);
      if (!piece.advance()) break;
    }
    if (step + 1 != cuts[b].size()) fail("the merge visits fewer pieces than were written", batch, ctas, b, static_cast<int>(step));
  }
}

}  // namespace

int main() {
  std::mt19937 random(7);
  int batches = 0;
  for (const int ctas : {1, 2, 3, 7, 64, 131, 132, 264}) {
    for (int trial = 0; trial < 300; ++trial) {
      const int batch = 1 + static_cast<int>(random() % (trial < 100 ? 4 : 80));
      std::vector<int> lengths(batch);
      for (int& length : lengths) {
        switch (random() % 5) {
          case 0: length = 0; break;
          case 1: length = 1 + static_cast<int>(random() % 64); break;      // one page, partial or full
          case 2: length = 50 + static_cast<int>(random() % 151); break;    // TP8 B 2's range
          case 3: length = 1 + static_cast<int>(random() % 8192); break;
          default: length = 8192; break;                                    // TP8 B 64's
        }
      }
      check(lengths, ctas);
      ++batches;
    }
  }
  check(std::vector<int>(64, 8192), 132);  // deepseek-v3-tp8-B64-ctx8192
  check({50, 200}, 132);                   // deepseek-v3-tp8-B2-ctx50-200's kind
  if (failures > 0) {
    std::printf("%d failures over %d batches\n", failures, batches + 2);
    return 1;
  }
  std::printf("ok: %d batches, every page once, every cut sequence's pieces found in order\n", batches + 2);
  return 0;
}
