#include <gtest/gtest.h>

#include <random>

#include "runner/sha256.hpp"

using d2k::Sha256;
using d2k::sha256_hex;

// FIPS 180-2, appendix B, and the empty message.
TEST(Sha256, MatchesTheFipsVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmno"
                       "pqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

// Padding crosses into a second block at 56 bytes and more; every length around it must agree
// between one-shot and piecewise hashing.
TEST(Sha256, IncrementalEqualsOneShotForRandomSplits) {
  std::mt19937 random(7);
  for (std::size_t length : {0u, 1u, 55u, 56u, 63u, 64u, 65u, 119u, 120u, 1000u, 4099u}) {
    std::string data(length, '\0');
    for (char& c : data) c = static_cast<char>(random());
    Sha256 pieces;
    std::size_t at = 0;
    while (at < length) {
      std::size_t take = std::min<std::size_t>(length - at, random() % 70);
      pieces.update(std::string_view(data).substr(at, take));
      at += take;
    }
    EXPECT_EQ(pieces.hex_digest(), sha256_hex(data)) << "length " << length;
  }
  EXPECT_NE(sha256_hex("abd"), sha256_hex("abc"));
}
