// SHA-256 (FIPS 180-4), for content-addressed build caching. Hand-written to keep the runner free of
// a crypto dependency; it is not used for anything an attacker could profit from colliding.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace d2k {

class Sha256 {
 public:
  Sha256();
  Sha256& update(std::string_view data);
  // Finishes the hash; the object must not be updated afterwards.
  std::array<uint8_t, 32> digest();
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> block_{};
  std::size_t block_size_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view data);

}  // namespace d2k
