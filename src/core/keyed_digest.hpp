// A keyed digest of a tensor's bytes: the worker computes it on the device (timing/device_digest.hpp) for
// what need not travel back whole (inputs that must be unchanged, a deterministic repeat's outputs), the
// orchestrator on the host from the bytes it holds. The key is the evaluation's (WorkerRequest::
// digest_key); without it a change that keeps the digest cannot be computed, so a solution that modifies
// an input cannot make it look untouched except by reading the worker's memory.
//
// digest = (sum over 8-byte words w_i of mix(w_i ^ mix(key + i * 0x9E3779B97F4A7C15)) + mix(key ^ n)) mod 2^64,
// n the byte count and the last word padded with zeros; mix is the splitmix64 finalizer. A sum, so
// chunks can be digested in parallel and added; the per-position key means moving or swapping words
// changes it too.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/splitmix.hpp"

namespace d2k {

// The same arithmetic on the host and, in timing/device_digest.cu, on the device.
D2K_HOST_DEVICE inline constexpr uint64_t digest_mix(uint64_t z) { return splitmix_finalize(z); }

D2K_HOST_DEVICE inline constexpr uint64_t digest_word(uint64_t key, uint64_t index, uint64_t word) {
  return digest_mix(word ^ digest_mix(key + index * kSplitMixIncrement));
}

D2K_HOST_DEVICE inline constexpr uint64_t digest_length(uint64_t key, uint64_t bytes) { return digest_mix(key ^ bytes); }

// The digest of `bytes` bytes at `data` (host memory), on up to `threads` threads for large buffers (the
// worker passes 1: a thread of its own could linger in the thread count it checks after every call).
uint64_t keyed_digest(uint64_t key, const void* data, std::size_t bytes, unsigned threads = 1);

}  // namespace d2k
