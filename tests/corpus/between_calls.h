// What the round-2 cheats that work between the calls share (ROUND2.md, class 5): the work, done by
// whatever runs while the worker is between two timed calls (a signal handler, a timer, a child that
// shares the memory). Each timed call uses one of the rotation's copies of the tensors, and before it
// the worker restores and patches that copy's inputs and poisons its outputs, then flushes the cache
// (milliseconds on the cpu device). So `tick` looks at every copy a timed call has used: one whose
// outputs were just poisoned is the next call's, its inputs are ready, and it computes them there and
// then, outside every timed window; the timed call finds its outputs written and returns at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "honest_quant.h"  // an honest quant/fp8_group_quant on the cpu device

namespace between {

constexpr int kMaxCopies = 256;
constexpr int kMaxScalars = 8;

struct Copy {
  d2k_tensor input;
  d2k_tensor outputs[2];  // q, scales
  std::atomic<int> busy{0};
};

inline Copy copies[kMaxCopies];
inline std::atomic<int> known{0};
inline d2k_scalar scalars[kMaxScalars];
inline int num_scalars = 0;
inline std::atomic<bool> in_call{false};
inline std::atomic<long> computed_between{0};  // calls whose outputs were ready before they started

inline bool all_ff(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i)
    if (p[i] != 0xFF) return false;
  return true;
}

// Both outputs poisoned at both ends: the worker has prepared this copy for its next call.
inline bool poisoned(const Copy& copy) {
  const d2k_tensor &q = copy.outputs[0], &s = copy.outputs[1];
  const int64_t q_last = span_bytes(q, 1) - 1, s_last = span_bytes(s, 4) - 4;
  return all_ff(q.data, 1) && all_ff(static_cast<const char*>(q.data) + q_last, 1) && all_ff(s.data, 4) &&
         all_ff(static_cast<const char*>(s.data) + s_last, 4);
}

inline void compute(Copy& copy) {
  d2k_call call{};
  call.abi_version = D2K_ABI_VERSION;
  call.inputs = &copy.input;
  call.num_inputs = 1;
  call.outputs = copy.outputs;
  call.num_outputs = 2;
  call.scalars = scalars;
  call.num_scalars = num_scalars;
  quantize(&call);
}

// Runs between the calls: computes every known copy that the worker has just poisoned.
inline void tick() {
  if (in_call.load()) return;
  const int n = known.load();
  for (int i = 0; i < n; ++i) {
    Copy& copy = copies[i];
    if (!poisoned(copy)) continue;
    int idle = 0;
    if (!copy.busy.compare_exchange_strong(idle, 1)) continue;
    compute(copy);
    copy.busy.store(0);
  }
}

// In a timed call: true when the call's outputs were computed before it started (then it need not do
// anything); otherwise learns the copy, for `tick` to compute before its next call.
inline bool served(const d2k_call* call) {
  const int n = known.load();
  for (int i = 0; i < n; ++i) {
    Copy& copy = copies[i];
    if (copy.input.data != call->inputs[0].data) continue;
    while (copy.busy.load() != 0) {
    }
    if (!poisoned(copy)) {
      computed_between.fetch_add(1);
      return true;
    }
    return false;
  }
  if (n < kMaxCopies) {
    Copy& copy = copies[n];
    copy.input = call->inputs[0];
    copy.outputs[0] = call->outputs[0];
    copy.outputs[1] = call->outputs[1];
    num_scalars = call->num_scalars < kMaxScalars ? call->num_scalars : kMaxScalars;
    for (int i = 0; i < num_scalars; ++i) scalars[i] = call->scalars[i];
    known.store(n + 1);
  }
  return false;
}

// d2k_run of every class-5 cheat: honest until timing starts, then served by the work between calls.
inline int run(const d2k_call* call, bool timed) {
  if (timed && served(call)) return 0;
  in_call.store(true);
  quantize(call);
  in_call.store(false);
  return 0;
}

}  // namespace between
