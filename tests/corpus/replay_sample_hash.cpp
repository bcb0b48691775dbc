// Round 2, class 3 (threat 17): a cache keyed on a hash of 64 sampled elements, used only once timing
// starts (timed_calls.h), so the second draw, which the first round's cache_by_value.cpp fell to, never
// sees it. A timed call whose 64 samples hash to a key seen before copies the outputs kept for it; the
// rotated copies of one draw all share a key.
// Expected: rejected, "outputs of timed call ... do not match" (each timed call's patch swaps a few
// elements, which 64 samples of thousands almost never include: about 2% per swap on deepseek-v3-T1).
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below
#include "timed_calls.h"

#include <map>
#include <string>

namespace {

struct Outputs {
  std::string q, s;
};

uint64_t sampled_key(const d2k_tensor& x) {
  const auto* d = static_cast<const uint16_t*>(x.data);
  const int64_t n = x.shape[0] * x.shape[1];
  uint64_t h = 1469598103934665603ULL ^ uint64_t(x.shape[0]) ^ (uint64_t(x.shape[1]) << 32);
  for (int64_t i = 0; i < 64; ++i) {
    const int64_t flat = (i * 2654435761LL) % n;
    h = (h ^ d[flat / x.shape[1] * x.strides[0] + flat % x.shape[1] * x.strides[1]]) * 1099511628211ULL;
  }
  return h;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  static std::map<uint64_t, Outputs> cache;
  const d2k_tensor &q = call->outputs[0], &s = call->outputs[1];
  if (!timing_started(call)) {
    quantize(call);
    return 0;
  }
  const uint64_t key = sampled_key(call->inputs[0]);
  if (auto hit = cache.find(key); hit != cache.end()) {
    std::memcpy(q.data, hit->second.q.data(), hit->second.q.size());
    std::memcpy(s.data, hit->second.s.data(), hit->second.s.size());
    return 0;
  }
  quantize(call);
  cache[key] = {std::string(static_cast<const char*>(q.data), size_t(span_bytes(q, 1))),
                std::string(static_cast<const char*>(s.data), size_t(span_bytes(s, 4)))};
  return 0;
}
