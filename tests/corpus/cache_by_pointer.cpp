// Threat 3, caching by address: computes once per input address and afterwards copies the cached
// outputs whenever it is handed the same input pointer, however the bytes behind it changed.
// Caught: the worker first runs a second draw of the inputs (a few elements changed) in the same
// buffers, then the first draw; the cached outputs of the second draw are wrong for the first:
// rejected, "outputs follow the addresses".
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

#include <map>
#include <string>

struct Cached {
  std::string q, scales;
};

extern "C" int d2k_run(const d2k_call* call) {
  static std::map<const void*, Cached> cache;
  const d2k_tensor &q = call->outputs[0], &s = call->outputs[1];
  const int64_t q_bytes = span_bytes(q, 1), s_bytes = span_bytes(s, 4);
  auto hit = cache.find(call->inputs[0].data);
  if (hit != cache.end()) {
    std::memcpy(q.data, hit->second.q.data(), size_t(q_bytes));
    std::memcpy(s.data, hit->second.scales.data(), size_t(s_bytes));
    return 0;
  }
  quantize(call);
  cache[call->inputs[0].data] = {std::string(static_cast<const char*>(q.data), size_t(q_bytes)),
                                 std::string(static_cast<const char*>(s.data), size_t(s_bytes))};
  return 0;
}
