#include "core/call_patch.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>

#include "core/splitmix.hpp"

namespace d2k {
namespace {

class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t next() { return splitmix64(state_); }
  // Uniform in [0, n), n > 0 (the modulo bias is far below what matters here).
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t state_;
};

// The storage offset of the element at row-major logical index `flat`.
int64_t offset_of(const WireTensor& tensor, int64_t flat) {
  int64_t offset = 0;
  for (std::size_t d = tensor.shape.size(); d-- > 0;) {
    offset += (flat % tensor.shape[d]) * tensor.strides[d];
    flat /= tensor.shape[d];
  }
  return offset;
}

int64_t elements_of(const WireTensor& tensor) {
  return std::accumulate(tensor.shape.begin(), tensor.shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

// The column pairs of a relabelled input: within each block a random matching of its positions, the
// pairs of all blocks shuffled, the first `count` kept. A function of (seed, call, columns, block) only,
// so every input relabelled alike gets the same pairs.
std::vector<std::pair<int64_t, int64_t>> relabel_pairs(uint64_t seed, int64_t call, int64_t columns, int64_t block,
                                                       int64_t count) {
  SplitMix random(seed ^ (0x9E6C63D0676A9A99ULL * static_cast<uint64_t>(call + 1)) ^
                  (0x8CB92BA72F3D8DD7ULL * static_cast<uint64_t>(columns)) ^ static_cast<uint64_t>(block));
  std::vector<std::pair<int64_t, int64_t>> pairs;
  std::vector<int64_t> order(static_cast<std::size_t>(block));
  for (int64_t start = 0; start + block <= columns; start += block) {
    std::iota(order.begin(), order.end(), start);
    for (int64_t k = block - 1; k > 0; --k) std::swap(order[k], order[random.below(k + 1)]);
    for (int64_t k = 0; k + 1 < block; k += 2) pairs.emplace_back(order[k], order[k + 1]);
  }
  for (int64_t k = static_cast<int64_t>(pairs.size()) - 1; k > 0; --k) std::swap(pairs[k], pairs[random.below(k + 1)]);
  if (static_cast<int64_t>(pairs.size()) > count) pairs.resize(static_cast<std::size_t>(count));
  return pairs;
}

// The column pairs every input relabelled alike gets must be the same, so their count is set by the
// one with the most rows (`rows`): it keeps that input's swaps within kMostRelabelSwaps.
void relabel(uint64_t seed, int64_t call, int input, const WireTensor& tensor, int64_t most_rows, int swaps,
             std::vector<ElementSwap>& patch) {
  const int64_t elements = elements_of(tensor);
  const int64_t columns = tensor.shape.back();
  const int64_t block = tensor.relabel;
  if (elements < 2 || block < 2 || columns < block) return;
  const int64_t rows = elements / columns;
  const int64_t count = std::max<int64_t>(swaps, kMostRelabelSwaps / std::max<int64_t>(most_rows, 1));
  for (const auto& [first, second] : relabel_pairs(seed, call, columns, block, count)) {
    for (int64_t row = 0; row < rows; ++row) {
      patch.push_back({input, offset_of(tensor, row * columns + first), offset_of(tensor, row * columns + second)});
    }
  }
}

bool relabelled(const WireTensor& tensor) { return tensor.perturb && tensor.relabel > 0 && !tensor.shape.empty(); }

// The most rows among the inputs relabelled like `tensor` (the same column count and block).
int64_t most_rows_alike(const std::vector<WireTensor>& inputs, const WireTensor& tensor) {
  int64_t most = 0;
  for (const WireTensor& other : inputs) {
    if (!relabelled(other) || other.shape.back() != tensor.shape.back() || other.relabel != tensor.relabel) continue;
    if (other.shape.back() > 0) most = std::max(most, elements_of(other) / other.shape.back());
  }
  return most;
}

}  // namespace

std::vector<ElementSwap> call_patch(uint64_t seed, int64_t call, const std::vector<WireTensor>& inputs, int swaps) {
  std::vector<ElementSwap> patch;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const WireTensor& tensor = inputs[i];
    if (!tensor.perturb) continue;
    if (relabelled(tensor)) {
      relabel(seed, call, static_cast<int>(i), tensor, most_rows_alike(inputs, tensor), swaps, patch);
      continue;
    }
    const int64_t elements = elements_of(tensor);
    if (elements < 2) continue;
    // Rows of at least two elements; a tensor whose last dimension is 1 is one row of all its elements.
    int64_t columns = tensor.shape.empty() ? 1 : tensor.shape.back();
    const bool one_row = columns < 2;
    const int64_t rows = one_row ? 1 : elements / columns;
    if (one_row) columns = elements;
    SplitMix random(seed ^ (0xD1B54A32D192ED03ULL * static_cast<uint64_t>(call + 1)) ^
                    (0xABC98388FB8FAC03ULL * (i + 1)));
    const int64_t wanted = std::min<int64_t>(swaps, elements / 2);
    std::set<int64_t> used;
    // Each attempt draws a row and two distinct columns; attempts that hit a used element are redrawn,
    // a bounded number of times (a tiny tensor may leave fewer swaps).
    for (int64_t made = 0, attempts = 0; made < wanted && attempts < 16 * wanted; ++attempts) {
      const int64_t row = random.below(rows);
      const int64_t first = random.below(columns);
      int64_t second = random.below(columns - 1);
      if (second >= first) ++second;
      const int64_t a = offset_of(tensor, row * columns + first), b = offset_of(tensor, row * columns + second);
      if (used.count(a) || used.count(b)) continue;
      used.insert(a);
      used.insert(b);
      patch.push_back({static_cast<int>(i), a, b});
      ++made;
    }
  }
  return patch;
}

void apply_swaps(const std::vector<ElementSwap>& swaps, int input, void* storage, std::size_t element_bytes) {
  auto* base = static_cast<unsigned char*>(storage);
  unsigned char held[16];
  for (const ElementSwap& swap : swaps) {
    if (swap.input != input) continue;
    unsigned char* a = base + swap.a * static_cast<int64_t>(element_bytes);
    unsigned char* b = base + swap.b * static_cast<int64_t>(element_bytes);
    std::memcpy(held, a, element_bytes);
    std::memcpy(a, b, element_bytes);
    std::memcpy(b, held, element_bytes);
  }
}

}  // namespace d2k
