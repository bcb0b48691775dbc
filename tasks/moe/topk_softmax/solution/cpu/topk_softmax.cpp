// moe/topk_softmax on the cpu device: a plain host implementation of the solution ABI.
// Experts are ranked by their logits (the exact order of the probabilities) with a stable sort, so
// equal logits keep index order; the weights are computed in double and rounded once to float.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdarg>
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

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* logits = find(call->inputs, call->num_inputs, "logits");
  const d2k_tensor* weights = find(call->outputs, call->num_outputs, "weights");
  const d2k_tensor* ids = find(call->outputs, call->num_outputs, "ids");
  if (!logits || !weights || !ids)
    return fail(call, "topk_softmax: expected input 'logits' and outputs 'weights' and 'ids'");
  if (logits->dtype != D2K_FLOAT32 || weights->dtype != D2K_FLOAT32 || ids->dtype != D2K_INT32)
    return fail(call, "topk_softmax: expected logits f32, weights f32, ids i32 (got dtypes %d, %d, %d)",
                logits->dtype, weights->dtype, ids->dtype);
  if (logits->rank != 2 || weights->rank != 2 || ids->rank != 2)
    return fail(call, "topk_softmax: expected rank-2 tensors (got %d, %d, %d)", logits->rank,
                weights->rank, ids->rank);
  const int64_t T = logits->shape[0], E = logits->shape[1], k = weights->shape[1];
  if (weights->shape[0] != T || ids->shape[0] != T || ids->shape[1] != k)
    return fail(call, "topk_softmax: weights [%lld,%lld] and ids [%lld,%lld] must both be [T=%lld,k]",
                (long long)weights->shape[0], (long long)k, (long long)ids->shape[0],
                (long long)ids->shape[1], (long long)T);
  if (E > INT32_MAX)
    return fail(call, "topk_softmax: E=%lld experts do not fit the int32 ids", (long long)E);
  if (E < 1 || k < 1 || k > E)
    return fail(call, "topk_softmax: need 1 <= k <= E (E=%lld, k=%lld)", (long long)E, (long long)k);

  bool renormalize = true;
  for (int i = 0; i < call->num_scalars; ++i)
    if (call->scalars[i].name && std::strcmp(call->scalars[i].name, "renormalize") == 0)
      renormalize = call->scalars[i].i != 0;

  const float* in = static_cast<const float*>(logits->data);
  float* w = static_cast<float*>(weights->data);
  int32_t* id = static_cast<int32_t*>(ids->data);
  std::vector<float> row(E);
  std::vector<int32_t> order(E);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) row[e] = in[t * logits->strides[0] + e * logits->strides[1]];
    std::iota(order.begin(), order.end(), 0);
    // Float comparison treats -0.0 and +0.0 as equal, as the probabilities do.
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    const double max = row[order[0]];
    double denom = 0.0;
    if (renormalize) {
      for (int64_t j = 0; j < k; ++j) denom += std::exp(double(row[order[j]]) - max);
    } else {
      for (int64_t e = 0; e < E; ++e) denom += std::exp(double(row[e]) - max);
    }
    for (int64_t j = 0; j < k; ++j) {
      w[t * weights->strides[0] + j * weights->strides[1]] =
          static_cast<float>(std::exp(double(row[order[j]]) - max) / denom);
      id[t * ids->strides[0] + j * ids->strides[1]] = order[j];
    }
  }
  return 0;
}
