// Round 2, class 3 (threat 17): computes only when the input changed, judged by its first 4 KiB. Honest on
// the checked calls; once timing starts (timed_calls.h), a call whose x begins with the same 4 KiB as the
// previous call's copies the previous outputs (a cheap "did anything change" test, blind to what lies
// further on).
// Expected: rejected, "outputs of timed call ... do not match" (the per-call patch lands anywhere in x;
// on qwen3-235b-T333-K1536, run with --final, 4 KiB is 1.3 of 333 rows, so nearly every timed call is
// replayed; on the one-row deepseek-v3-T1 about a third of x, and the catch depends on the seed).
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below
#include "timed_calls.h"

#include <algorithm>
#include <string>

extern "C" int d2k_run(const d2k_call* call) {
  static std::string head, q_bytes, s_bytes;
  const d2k_tensor &x = call->inputs[0], &q = call->outputs[0], &s = call->outputs[1];
  const auto* x_bytes = static_cast<const char*>(x.data);
  const size_t head_bytes = std::min<size_t>(4096, size_t(span_bytes(x, 2)));
  const bool same = head.size() == head_bytes && std::memcmp(head.data(), x_bytes, head_bytes) == 0;
  if (timing_started(call) && same && !q_bytes.empty()) {
    std::memcpy(q.data, q_bytes.data(), q_bytes.size());
    std::memcpy(s.data, s_bytes.data(), s_bytes.size());
    return 0;
  }
  quantize(call);
  head.assign(x_bytes, head_bytes);
  q_bytes.assign(static_cast<const char*>(q.data), size_t(span_bytes(q, 1)));
  s_bytes.assign(static_cast<const char*>(s.data), size_t(span_bytes(s, 4)));
  return 0;
}
