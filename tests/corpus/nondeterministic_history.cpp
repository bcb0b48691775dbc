// Threat 12, outputs that depend on more than the inputs: state kept from earlier calls (here a
// call counter; in real code, uninitialized or stale memory that usually holds the right value)
// nudges the scales by one fp32 ulp on every other call, inside the tolerance.
// Caught: the task is deterministic (task.toml), so the worker runs the second draw twice with the
// outputs re-poisoned between, and the bytes must be equal: rejected, "changed between two runs".
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

extern "C" int d2k_run(const d2k_call* call) {
  static int calls = 0;
  quantize(call);
  if (++calls % 2 == 0) {
    const d2k_tensor& s = call->outputs[1];
    for (int64_t t = 0; t < s.shape[0]; ++t)
      for (int64_t g = 0; g < s.shape[1]; ++g) {
        float& scale = static_cast<float*>(s.data)[t * s.strides[0] + g * s.strides[1]];
        scale = std::nextafter(scale, 1e30f);
      }
  }
  return 0;
}
