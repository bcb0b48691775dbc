// sample/top_k_top_p on the cpu device: a plain host implementation of the solution ABI.
// Per row: the k-th largest value by selection (no sort of the vocabulary), the top-p cut by sorting only
// the kept values and walking their tie groups, then an inverse-CDF draw in index order with a uniform
// number that is a pure function of (seed, row). Sums in double.
#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
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

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A uniform number in [0, 1) from (seed, row): the same seed gives the same draws, another seed others.
double uniform(uint64_t seed, int64_t row) {
  const uint64_t bits = mix(mix(seed + 0x9E3779B97F4A7C15ULL) + static_cast<uint64_t>(row) * 0xD1B54A32D192ED03ULL);
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

int64_t sample_row(const float* p, int64_t stride, int64_t vocab, int64_t k, double top_p, double u,
                   std::vector<float>& scratch) {
  scratch.resize(static_cast<std::size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) scratch[static_cast<std::size_t>(i)] = p[i * stride];
  // Top-k: the k-th largest value; every value at least it stays (ties at the k-th place included).
  float kth = 0.0f;
  if (k > 0 && k < vocab) {
    std::nth_element(scratch.begin(), scratch.begin() + (k - 1), scratch.end(), std::greater<>());
    kth = scratch[static_cast<std::size_t>(k - 1)];
  } else {
    kth = *std::min_element(scratch.begin(), scratch.end());
  }
  // The kept values, largest first, and their total.
  auto end = std::partition(scratch.begin(), scratch.end(), [&](float x) { return x >= kth && x > 0.0f; });
  double total = 0;
  for (auto it = scratch.begin(); it != end; ++it) total += *it;
  // Top-p: tie groups in descending order stay while the mass above them is below p of the total.
  float least = kth;
  double kept = total;
  if (top_p < 1.0) {
    std::sort(scratch.begin(), end, std::greater<>());
    double above = 0;
    for (auto it = scratch.begin(); it != end;) {
      auto group_end = it;
      double mass = 0;
      while (group_end != end && *group_end == *it) mass += *group_end++;
      if (above >= top_p * total) break;
      least = *it;
      above += mass;
      it = group_end;
    }
    kept = above;
  }
  least = std::max(least, kth);
  // Inverse CDF in index order over the kept tokens.
  const double target = u * kept;
  double acc = 0;
  int64_t last = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    const float x = p[i * stride];
    if (!(x >= least && x > 0.0f)) continue;
    acc += x;
    last = i;
    if (acc > target) return i;
  }
  return last;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* probs = find(call->inputs, call->num_inputs, "probs");
  const d2k_tensor* top_k = find(call->inputs, call->num_inputs, "top_k");
  const d2k_tensor* top_p = find(call->inputs, call->num_inputs, "top_p");
  const d2k_tensor* out = find(call->outputs, call->num_outputs, "token_ids");
  if (!probs || !top_k || !top_p || !out)
    return fail(call, "top_k_top_p: expected inputs 'probs', 'top_k', 'top_p' and output 'token_ids'");
  if (probs->dtype != D2K_FLOAT32 || top_k->dtype != D2K_INT32 || top_p->dtype != D2K_FLOAT32 || out->dtype != D2K_INT64)
    return fail(call, "top_k_top_p: expected probs f32, top_k i32, top_p f32, token_ids i64");
  if (probs->rank != 2 || top_k->rank != 1 || top_p->rank != 1 || out->rank != 1)
    return fail(call, "top_k_top_p: expected probs [B,V] and top_k, top_p, token_ids [B]");
  const int64_t rows = probs->shape[0], vocab = probs->shape[1];
  if (top_k->shape[0] != rows || top_p->shape[0] != rows || out->shape[0] != rows || vocab < 1)
    return fail(call, "top_k_top_p: top_k, top_p and token_ids must have B=%lld elements, V >= 1", (long long)rows);
  uint64_t seed = 0;
  bool seeded = false;
  for (int i = 0; i < call->num_scalars; ++i)
    if (call->scalars[i].name && std::strcmp(call->scalars[i].name, "seed") == 0) {
      seed = static_cast<uint64_t>(call->scalars[i].i);
      seeded = true;
    }
  if (!seeded) return fail(call, "top_k_top_p: no scalar 'seed'");

  const auto* p = static_cast<const float*>(probs->data);
  const auto* k = static_cast<const int32_t*>(top_k->data);
  const auto* pp = static_cast<const float*>(top_p->data);
  auto* tokens = static_cast<int64_t*>(out->data);
  std::vector<float> scratch;
  for (int64_t b = 0; b < rows; ++b) {
    tokens[b * out->strides[0]] = sample_row(p + b * probs->strides[0], probs->strides[1], vocab,
                                             k[b * top_k->strides[0]], pp[b * top_p->strides[0]],
                                             uniform(seed, b), scratch);
  }
  return 0;
}
