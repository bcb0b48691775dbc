// The keyed digest (core/keyed_digest.hpp): a change anywhere, a move, or another key changes it; the
// threaded sum is the sequential one.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/keyed_digest.hpp"

using namespace d2k;

TEST(KeyedDigest, AnyChangedByteMovedWordOrOtherKeyChangesIt) {
  std::mt19937_64 random(5);
  std::vector<uint64_t> words(1000);
  for (auto& w : words) w = random();
  const uint64_t base = keyed_digest(11, words.data(), words.size() * 8);
  EXPECT_EQ(base, keyed_digest(11, words.data(), words.size() * 8));
  EXPECT_NE(base, keyed_digest(12, words.data(), words.size() * 8));
  auto changed = words;
  reinterpret_cast<unsigned char*>(changed.data())[4321] ^= 1;
  EXPECT_NE(base, keyed_digest(11, changed.data(), changed.size() * 8));
  auto swapped = words;
  std::swap(swapped[3], swapped[700]);
  EXPECT_NE(base, keyed_digest(11, swapped.data(), swapped.size() * 8));
  // The length counts: trailing zero bytes are not nothing.
  const std::string a(13, '\0'), b(14, '\0');
  EXPECT_NE(keyed_digest(11, a.data(), a.size()), keyed_digest(11, b.data(), b.size()));
}

TEST(KeyedDigest, ThreadsGiveTheSameDigest) {
  std::vector<unsigned char> bytes((std::size_t{9} << 23) + 5);  // 72 MB and a ragged end: two chunks
  std::mt19937 random(3);
  for (std::size_t i = 0; i < bytes.size(); i += 4096) bytes[i] = static_cast<unsigned char>(random());
  EXPECT_EQ(keyed_digest(77, bytes.data(), bytes.size(), 1), keyed_digest(77, bytes.data(), bytes.size(), 4));
}
