// splitmix64: a small generator whose stream depends on every bit of its seed, and its finalizer, which
// mixes one word. The one copy of both for the harness (the worker's poison and sampling, the patches,
// the digests, the agent's seeds), on the host and, through core/keyed_digest.hpp, on the device.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define D2K_HOST_DEVICE __host__ __device__
#else
#define D2K_HOST_DEVICE
#endif

namespace d2k {

inline constexpr uint64_t kSplitMixIncrement = 0x9E3779B97F4A7C15ULL;

D2K_HOST_DEVICE inline constexpr uint64_t splitmix_finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The next number of the stream whose state is `state` (advanced).
inline uint64_t splitmix64(uint64_t& state) { return splitmix_finalize(state += kSplitMixIncrement); }

}  // namespace d2k
