// A hurried implementer's mistake (issue 12), not a cheat: moe/grouped_topk weighting the chosen experts
// by their biased scores (sigmoid + e_score_correction_bias), the values it ranked, instead of the
// unbiased sigmoid scores. The ids are right; the bias is a routing device and must not change how much
// each expert counts. Caught on a smoke workload: incorrect_numerics, "'weights'".
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor &logits = call->inputs[0], &bias = call->inputs[1];
  const d2k_tensor &weights = call->outputs[0], &ids = call->outputs[1];
  int64_t G = 8, keep = 4;
  double scale = 2.5;
  for (int i = 0; i < call->num_scalars; ++i) {
    if (std::strcmp(call->scalars[i].name, "num_expert_group") == 0) G = call->scalars[i].i;
    if (std::strcmp(call->scalars[i].name, "topk_group") == 0) keep = call->scalars[i].i;
    if (std::strcmp(call->scalars[i].name, "routed_scaling_factor") == 0) scale = call->scalars[i].f;
  }
  const int64_t T = logits.shape[0], E = logits.shape[1], k = weights.shape[1], per = E / G;
  const auto* x = static_cast<const float*>(logits.data);
  const auto* b = static_cast<const float*>(bias.data);
  std::vector<double> c(E), score(G);
  std::vector<int64_t> order(G), experts;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) c[e] = 1.0 / (1.0 + std::exp(-double(x[t * E + e]))) + b[e];
    for (int64_t g = 0; g < G; ++g) {
      std::vector<double> v(c.begin() + g * per, c.begin() + (g + 1) * per);
      std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<>());
      score[g] = v[0] + v[1];
    }
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) { return score[p] > score[q]; });
    std::sort(order.begin(), order.begin() + keep);
    experts.clear();
    for (int64_t j = 0; j < keep; ++j)
      for (int64_t e = order[j] * per; e < (order[j] + 1) * per; ++e) experts.push_back(e);
    std::stable_sort(experts.begin(), experts.end(), [&](int64_t p, int64_t q) { return c[p] > c[q]; });
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += c[experts[j]];  // the mistake: the biased score
    for (int64_t j = 0; j < k; ++j) {
      static_cast<float*>(weights.data)[t * k + j] = static_cast<float>(c[experts[j]] / sum * scale);
      static_cast<int32_t*>(ids.data)[t * k + j] = static_cast<int32_t>(experts[j]);
    }
  }
  return 0;
}
