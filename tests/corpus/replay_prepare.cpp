// Round 2, class 3 (threat 17): everything computed in d2k_prepare, which is not timed. It quantizes the
// x that d2k_prepare is shown into outputs of its own and keeps them; the checked calls compute
// honestly, and once timing starts (timed_calls.h) every call copies the prepared outputs and returns.
// With the first round's worker d2k_prepare saw the first draw, which every timed call ran on: passed.
// Expected: rejected, "outputs of timed call ... do not match" (x is an activation, not declared visible
// to d2k_prepare, so it held poison there; and every timed call's inputs carry a fresh patch anyway).
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below
#include "timed_calls.h"

#include <string>

namespace {

struct Prepared {
  std::string q, s;
};

}  // namespace

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  auto* kept = new Prepared;
  kept->q.resize(size_t(span_bytes(call->outputs[0], 1)));
  kept->s.resize(size_t(span_bytes(call->outputs[1], 4)));
  d2k_tensor outputs[2] = {call->outputs[0], call->outputs[1]};
  outputs[0].data = kept->q.data();
  outputs[1].data = kept->s.data();
  d2k_call own = *call;
  own.outputs = outputs;
  quantize(&own);
  *prepared = kept;
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  if (!timing_started(call)) {
    quantize(call);
    return 0;
  }
  const auto* kept = static_cast<const Prepared*>(call->prepared);
  std::memcpy(call->outputs[0].data, kept->q.data(), kept->q.size());
  std::memcpy(call->outputs[1].data, kept->s.data(), kept->s.size());
  return 0;
}

extern "C" void d2k_release(void* prepared) { delete static_cast<Prepared*>(prepared); }
