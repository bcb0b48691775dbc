// Threat 3, caching by value: keys its cache on a cheap fingerprint of the input (64 sampled
// elements and the shape), so a repeated input costs only a copy of the cached outputs.
// Caught: the second draw the worker runs first differs from the first draw in about 1 in 1024
// elements; the fingerprint misses them (for most seeds, and for the default seed 1), so the first
// draw gets the second draw's outputs: rejected, "outputs follow the addresses (or a sample)".
// A fingerprint of every byte is not caught, and needs none: it reads all of the input, the cost
// of an honest memory-bound kernel.
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

#include <map>
#include <string>

struct Cached {
  std::string q, scales;
};

static uint64_t fingerprint(const d2k_tensor& x) {
  const auto* d = static_cast<const uint16_t*>(x.data);
  const int64_t n = x.shape[0] * x.shape[1];
  uint64_t h = 1469598103934665603ULL ^ uint64_t(x.shape[0]) ^ (uint64_t(x.shape[1]) << 32);
  for (int64_t i = 0; i < 64; ++i) {
    const int64_t flat = (i * 2654435761LL) % n;
    const int64_t t = flat / x.shape[1], k = flat % x.shape[1];
    h = (h ^ d[t * x.strides[0] + k * x.strides[1]]) * 1099511628211ULL;
  }
  return h;
}

extern "C" int d2k_run(const d2k_call* call) {
  static std::map<uint64_t, Cached> cache;
  const d2k_tensor &q = call->outputs[0], &s = call->outputs[1];
  const int64_t q_bytes = span_bytes(q, 1), s_bytes = span_bytes(s, 4);
  const uint64_t key = fingerprint(call->inputs[0]);
  auto hit = cache.find(key);
  if (hit != cache.end()) {
    std::memcpy(q.data, hit->second.q.data(), size_t(q_bytes));
    std::memcpy(s.data, hit->second.scales.data(), size_t(s_bytes));
    return 0;
  }
  quantize(call);
  cache[key] = {std::string(static_cast<const char*>(q.data), size_t(q_bytes)),
                std::string(static_cast<const char*>(s.data), size_t(s_bytes))};
  return 0;
}
