// A hurried implementer's mistake (issue 12), not a cheat: loss/cross_entropy dividing the gradient by N,
// the number of rows, where PyTorch's mean with ignore_index divides by the rows whose target is not -100;
// an honest fp32 loop otherwise (the max subtracted, one rounding, ignored rows zeroed). Every counted
// gradient is scaled by count / N (28/37 on the smoke workload with 9 of 37 rows ignored): far outside
// its bound: incorrect_numerics, "'logits'".
#include <cmath>

#include "bf16_bits.h"
#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& logits = call->outputs[0];
  const d2k_tensor& targets = call->inputs[1];
  auto* loss = static_cast<float*>(call->outputs[1].data);
  auto* x = static_cast<uint16_t*>(logits.data);
  const auto* y = static_cast<const int64_t*>(targets.data);
  const int64_t rows = logits.shape[0], vocab = logits.shape[1];
  const float inv_rows = 1.0f / static_cast<float>(rows);  // the mistake: N, not the counted rows
  for (int64_t i = 0; i < rows; ++i) {
    uint16_t* row = x + i * logits.strides[0];
    if (y[i] == -100) {
      for (int64_t j = 0; j < vocab; ++j) row[j] = 0;
      loss[i] = 0.0f;
      continue;
    }
    float max = -INFINITY;
    for (int64_t j = 0; j < vocab; ++j) max = std::fmax(max, bf16_to_float(row[j]));
    float sum = 0.0f;
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(bf16_to_float(row[j]) - max);
    const float lse = max + std::log(sum);
    loss[i] = lse - bf16_to_float(row[y[i]]);
    for (int64_t j = 0; j < vocab; ++j)
      row[j] = round_to_bf16((std::exp(bf16_to_float(row[j]) - lse) - (j == y[i] ? 1.0f : 0.0f)) * inv_rows);
  }
  return 0;
}
