// Round 2, class 3 (threat 17): a cache keyed on the first row of the input. Honest on the checked calls;
// once timing starts (timed_calls.h), each call hashes row 0 of x (and the shape) and, when it saw that
// row before, copies the outputs it kept for it instead of computing: rotated copies of one draw look the
// same to it.
// Expected: rejected, "outputs of timed call ... do not match" (the per-call patch swaps elements within
// rows anywhere in x, mostly not in row 0). Run it on a workload with many rows (qwen3-235b-T333-K1536
// with --final; on a one-row workload the key is the whole input, which is no cheat).
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below
#include "timed_calls.h"

#include <map>
#include <string>

namespace {

struct Outputs {
  std::string q, s;
};

uint64_t first_row_key(const d2k_tensor& x) {
  const auto* d = static_cast<const uint16_t*>(x.data);
  uint64_t h = 1469598103934665603ULL ^ uint64_t(x.shape[0]) ^ (uint64_t(x.shape[1]) << 32);
  for (int64_t k = 0; k < x.shape[1]; ++k) h = (h ^ d[k * x.strides[1]]) * 1099511628211ULL;
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
  const uint64_t key = first_row_key(call->inputs[0]);
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
