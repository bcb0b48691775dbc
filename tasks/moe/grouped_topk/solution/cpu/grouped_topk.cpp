// moe/grouped_topk on the cpu device: a plain host implementation of the solution ABI. Scores in double
// (the ranking is exact on the task's inputs, whose distinct scores are 1e-5 apart), groups and experts
// ranked by a stable sort on (score descending, index ascending), weights rounded once to float.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

#include "d2k/solution.h"

namespace {

int fail(const d2k_call* call, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(call->error, D2K_ERROR_CAPACITY, format, args);
  va_end(args);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int n, const char* name) {
  for (int i = 0; i < n; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

const d2k_scalar* find_scalar(const d2k_call* call, const char* name) {
  for (int i = 0; i < call->num_scalars; ++i)
    if (call->scalars[i].name && std::strcmp(call->scalars[i].name, name) == 0) return &call->scalars[i];
  return nullptr;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* logits = find(call->inputs, call->num_inputs, "logits");
  const d2k_tensor* bias = find(call->inputs, call->num_inputs, "bias");
  const d2k_tensor* weights = find(call->outputs, call->num_outputs, "weights");
  const d2k_tensor* ids = find(call->outputs, call->num_outputs, "ids");
  const d2k_scalar* groups_s = find_scalar(call, "num_expert_group");
  const d2k_scalar* keep_s = find_scalar(call, "topk_group");
  const d2k_scalar* renorm_s = find_scalar(call, "renormalize");
  const d2k_scalar* scale_s = find_scalar(call, "routed_scaling_factor");
  if (!logits || !bias || !weights || !ids || !groups_s || !keep_s || !renorm_s || !scale_s)
    return fail(call, "grouped_topk: expected inputs logits, bias, outputs weights, ids and the four scalars");
  if (logits->dtype != D2K_FLOAT32 || bias->dtype != D2K_FLOAT32 || weights->dtype != D2K_FLOAT32 || ids->dtype != D2K_INT32)
    return fail(call, "grouped_topk: expected logits, bias, weights f32 and ids i32");
  const int64_t T = logits->shape[0], E = logits->shape[1], k = weights->shape[1];
  const int64_t G = groups_s->i, keep = keep_s->i, per_group = G > 0 ? E / G : 0;
  if (G < 1 || E % G != 0 || per_group < 2 || keep < 1 || keep > G || k < 1 || k > keep * per_group)
    return fail(call, "grouped_topk: unsupported E=%lld, groups=%lld, topk_group=%lld, k=%lld", (long long)E,
                (long long)G, (long long)keep, (long long)k);
  const double scale = scale_s->f;
  const bool renormalize = renorm_s->i != 0;

  const auto* in = static_cast<const float*>(logits->data);
  const auto* b = static_cast<const float*>(bias->data);
  auto* w = static_cast<float*>(weights->data);
  auto* id = static_cast<int32_t*>(ids->data);
  std::vector<double> s(E), c(E), group_score(G);
  std::vector<int64_t> group_order(G), experts;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) {
      const double x = in[t * logits->strides[0] + e * logits->strides[1]];
      s[e] = 1.0 / (1.0 + std::exp(-x));
      c[e] = s[e] + static_cast<double>(b[e * bias->strides[0]]);
    }
    for (int64_t g = 0; g < G; ++g) {
      double first = -INFINITY, second = -INFINITY;
      for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) {
        if (c[e] > first) second = first, first = c[e];
        else if (c[e] > second) second = c[e];
      }
      group_score[g] = first + second;
    }
    std::iota(group_order.begin(), group_order.end(), 0);
    std::stable_sort(group_order.begin(), group_order.end(),
                     [&](int64_t x, int64_t y) { return group_score[x] > group_score[y]; });
    experts.clear();
    std::vector<int64_t> kept(group_order.begin(), group_order.begin() + keep);
    std::sort(kept.begin(), kept.end());  // experts in index order, so the stable sort breaks ties on the index
    for (int64_t g : kept)
      for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) experts.push_back(e);
    std::stable_sort(experts.begin(), experts.end(), [&](int64_t x, int64_t y) { return c[x] > c[y]; });
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) sum += s[experts[j]];
    for (int64_t j = 0; j < k; ++j) {
      const double value = (renormalize ? s[experts[j]] / sum : s[experts[j]]) * scale;
      w[t * weights->strides[0] + j * weights->strides[1]] = static_cast<float>(value);
      id[t * ids->strides[0] + j * ids->strides[1]] = static_cast<int32_t>(experts[j]);
    }
  }
  return 0;
}
