// Round 2, class 3 (threat 17): outputs kept in the workspace between calls. It asks for a workspace as
// large as its outputs; every call it computes stores them there, and once timing starts (timed_calls.h)
// every call copies the workspace into its outputs instead of computing, betting that the workspace
// still holds what the last checked call left (the harness allocated it once and never touched it).
// Expected: rejected, "outputs of timed call ... do not match" (the workspace is poisoned with 0xFF
// before every call, so the copy is NaN and -1; even kept, it would miss each call's patch).
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below
#include "timed_calls.h"

extern "C" int d2k_workspace_size(const d2k_call* call, size_t* bytes) {
  *bytes = size_t(span_bytes(call->outputs[0], 1) + span_bytes(call->outputs[1], 4));
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor &q = call->outputs[0], &s = call->outputs[1];
  const size_t q_bytes = size_t(span_bytes(q, 1)), s_bytes = size_t(span_bytes(s, 4));
  auto* kept = static_cast<char*>(call->workspace);
  if (timing_started(call)) {
    std::memcpy(q.data, kept, q_bytes);
    std::memcpy(s.data, kept + q_bytes, s_bytes);
    return 0;
  }
  quantize(call);
  std::memcpy(kept, q.data, q_bytes);
  std::memcpy(kept + q_bytes, s.data, s_bytes);
  return 0;
}
