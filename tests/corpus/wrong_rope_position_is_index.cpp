// A hurried implementer's mistake (issue 11), not a cheat: pos/rope_neox with the table row taken at the
// token's index in the batch instead of positions[t] (right for one sequence starting at position 0, wrong
// for a batch of sequences at their own offsets), an honest neox rotation otherwise. Caught: nearly every
// element of q and k is rotated by the wrong angle: incorrect_numerics, "'k'" (the first output the
// check names, in name order).
#include "bf16_bits.h"
#include "d2k/solution.h"

namespace {

void rotate(const d2k_tensor& x, const d2k_tensor& cache) {
  auto* data = static_cast<uint16_t*>(x.data);
  const auto* table = static_cast<const uint16_t*>(cache.data);
  const int64_t half = x.shape[2] / 2;
  for (int64_t t = 0; t < x.shape[0]; ++t) {
    const uint16_t* row = table + t * cache.strides[0];  // the mistake: t, not positions[t]
    for (int64_t h = 0; h < x.shape[1]; ++h) {
      uint16_t* head = data + t * x.strides[0] + h * x.strides[1];
      for (int64_t i = 0; i < half; ++i) {
        const float c = bf16_to_float(row[i * cache.strides[1]]), s = bf16_to_float(row[(half + i) * cache.strides[1]]);
        const float a = bf16_to_float(head[i * x.strides[2]]), b = bf16_to_float(head[(half + i) * x.strides[2]]);
        head[i * x.strides[2]] = round_to_bf16(a * c - b * s);
        head[(half + i) * x.strides[2]] = round_to_bf16(b * c + a * s);
      }
    }
  }
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  // Outputs in the task's order: q, k (in place); the table is the last input.
  const d2k_tensor& cache = call->inputs[call->num_inputs - 1];
  rotate(call->outputs[0], cache);
  rotate(call->outputs[1], cache);
  return 0;
}
