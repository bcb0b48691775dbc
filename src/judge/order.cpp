#include "judge/order.hpp"

#include <algorithm>

#include "core/splitmix.hpp"

namespace d2k::judge {
namespace {

// n!, saturated: the number of distinct orders, when it matters (it is small).
uint64_t orders_of(std::size_t n) {
  uint64_t out = 1;
  for (std::size_t k = 2; k <= n; ++k) {
    if (out > (1ULL << 40)) return out;
    out *= k;
  }
  return out;
}

}  // namespace

std::vector<std::vector<std::string>> sample_orders(const std::vector<std::string>& ids, int samples, uint64_t seed) {
  std::vector<std::vector<std::string>> out;
  uint64_t state = seed;
  const uint64_t distinct = orders_of(ids.size());
  for (int s = 0; s < samples; ++s) {
    std::vector<std::string> order;
    do {
      order = ids;
      for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[splitmix64(state) % i]);
    } while (out.size() < distinct && std::find(out.begin(), out.end(), order) != out.end());
    out.push_back(std::move(order));
  }
  return out;
}

}  // namespace d2k::judge
