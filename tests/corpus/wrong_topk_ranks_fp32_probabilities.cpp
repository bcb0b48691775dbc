// A hurried implementer's mistake (issue 11), not a cheat: moe/topk_softmax ranking the experts by their
// fp32 probabilities (vLLM's kernel and the eager fp32 softmax then sort do), not by the logits. Two
// logits one ulp apart round to one probability, and the tie then goes to the lower index even where
// that expert's logit is the smaller. Caught on the near-ties smoke workload: incorrect_numerics, "'ids'".
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& logits = call->inputs[0];
  const d2k_tensor *weights = &call->outputs[0], *ids = &call->outputs[1];
  if (std::strcmp(weights->name, "weights") != 0) std::swap(weights, ids);
  const int64_t T = logits.shape[0], E = logits.shape[1], k = weights->shape[1];
  const bool renormalize = call->scalars[0].i != 0;
  const auto* l = static_cast<const float*>(logits.data);
  std::vector<float> p(E);
  std::vector<int> order(E);
  for (int64_t t = 0; t < T; ++t) {
    float max = -INFINITY, sum = 0;
    for (int64_t e = 0; e < E; ++e) max = std::max(max, l[t * logits.strides[0] + e * logits.strides[1]]);
    for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(l[t * logits.strides[0] + e * logits.strides[1]] - max);
    for (int64_t e = 0; e < E; ++e) p[e] /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });  // the mistake
    float chosen = 0;
    for (int64_t j = 0; j < k; ++j) chosen += p[order[j]];
    for (int64_t j = 0; j < k; ++j) {
      static_cast<float*>(weights->data)[t * weights->strides[0] + j * weights->strides[1]] =
          renormalize ? p[order[j]] / chosen : p[order[j]];
      static_cast<int32_t*>(ids->data)[t * ids->strides[0] + j * ids->strides[1]] = order[j];
    }
  }
  return 0;
}
