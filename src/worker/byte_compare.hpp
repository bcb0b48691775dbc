// How many bytes of two buffers of one device differ: memcmp on the host, a counting kernel on a GPU
// (timing/device_compare.hpp), so that comparing two 268 MB outputs costs no trip through the host.
#pragma once

#include <cstddef>

#include "worker/buffers.hpp"

namespace d2k {

class ByteCompare {
 public:
  ByteCompare() = default;
  ~ByteCompare();
  ByteCompare(const ByteCompare&) = delete;
  ByteCompare& operator=(const ByteCompare&) = delete;

  // Buffers of different sizes differ in all the bytes of the larger. Throws d2k::Error on a device error.
  std::size_t operator()(const GuardedBuffer& a, const GuardedBuffer& b);

 private:
  void* counter_ = nullptr;  // cuda: one device word for the counting kernel, allocated on first use
};

}  // namespace d2k
