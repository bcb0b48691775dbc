#include "core/keyed_digest.hpp"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace d2k {
namespace {

// Words [first, last) of the buffer, the last one padded with zeros.
uint64_t digest_words(uint64_t key, const unsigned char* data, std::size_t bytes, std::size_t first,
                      std::size_t last) {
  uint64_t sum = 0;
  for (std::size_t i = first; i < last; ++i) {
    uint64_t word = 0;
    const std::size_t at = i * 8;
    std::memcpy(&word, data + at, std::min<std::size_t>(8, bytes - at));
    sum += digest_word(key, i, word);
  }
  return sum;
}

}  // namespace

uint64_t keyed_digest(uint64_t key, const void* data, std::size_t bytes, unsigned threads_wanted) {
  const auto* base = static_cast<const unsigned char*>(data);
  const std::size_t words = (bytes + 7) / 8;
  constexpr std::size_t kWordsPerThread = std::size_t{8} << 20;  // 64 MB
  const std::size_t threads =
      std::min<std::size_t>(std::max(1u, threads_wanted), (words + kWordsPerThread - 1) / kWordsPerThread);
  uint64_t sum = digest_length(key, bytes);
  if (threads <= 1) return sum + digest_words(key, base, bytes, 0, words);
  std::vector<uint64_t> parts(threads, 0);
  std::vector<std::thread> workers;
  const std::size_t per = (words + threads - 1) / threads;
  for (std::size_t t = 0; t < threads; ++t) {
    const std::size_t first = t * per, last = std::min(words, first + per);
    workers.emplace_back([&, t, first, last] { parts[t] = digest_words(key, base, bytes, first, last); });
  }
  for (auto& worker : workers) worker.join();
  for (uint64_t part : parts) sum += part;
  return sum;
}

}  // namespace d2k
