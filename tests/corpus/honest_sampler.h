// An honest sample/top_k_top_p on the cpu device, shared by the samplers of the corpus: each one's
// d2k_run is this sampler with its flaw (which uniform number a row gets, or which token it returns).
// corpus.sh builds each as a folder solution with this header beside it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "d2k/solution.h"

static uint64_t sampler_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A uniform number in [0, 1) from (seed, row, stream).
static double sampler_uniform(uint64_t seed, int64_t row, uint64_t stream = 0) {
  const uint64_t bits = sampler_mix(sampler_mix(seed + 0x9E3779B97F4A7C15ULL + stream) + uint64_t(row) * 0xD1B54A32D192ED03ULL);
  return double(bits >> 11) * 0x1.0p-53;
}

static uint64_t sampler_seed(const d2k_call* call) {
  for (int i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, "seed") == 0) return uint64_t(call->scalars[i].i);
  return 0;
}

// Row b of probs: the token the truncated distribution gives for uniform u (top-k with ties kept, top-p
// on the renormalized rest by value, inverse CDF in index order); `argmax` gets the row's most probable.
static int64_t sampler_row(const float* p, int64_t vocab, int64_t k, double top_p, double u, int64_t* argmax = nullptr) {
  std::vector<float> v(p, p + vocab);
  std::sort(v.begin(), v.end(), std::greater<>());
  const float kth = k > 0 && k < vocab ? v[size_t(k - 1)] : 0.0f;
  double total = 0;
  for (float x : v)
    if (x >= kth && x > 0) total += x;
  float least = kth;
  double kept = total;
  if (top_p < 1) {
    double above = 0;
    for (size_t i = 0; i < v.size() && v[i] >= kth && v[i] > 0;) {
      size_t j = i;
      double mass = 0;
      while (j < v.size() && v[j] == v[i]) mass += v[j++];
      if (above >= top_p * total) break;
      least = v[i];
      above += mass;
      i = j;
    }
    kept = above;
  }
  if (argmax) *argmax = std::max_element(p, p + vocab) - p;
  double acc = 0;
  int64_t last = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (!(p[i] >= least && p[i] > 0)) continue;
    acc += p[i];
    last = i;
    if (acc > u * kept) return i;
  }
  return last;
}

// Every row with uniform(seed, row) from `uniform`, its token passed through `pick` (row, token, argmax).
static int sampler_run(const d2k_call* call, const std::function<double(uint64_t, int64_t)>& uniform,
                       const std::function<int64_t(int64_t, int64_t, int64_t)>& pick) {
  const d2k_tensor &probs = call->inputs[0], &top_k = call->inputs[1], &top_p = call->inputs[2];
  const int64_t rows = probs.shape[0], vocab = probs.shape[1];
  const uint64_t seed = sampler_seed(call);
  auto* out = static_cast<int64_t*>(call->outputs[0].data);
  for (int64_t b = 0; b < rows; ++b) {
    int64_t argmax = 0;
    const int64_t token = sampler_row(static_cast<const float*>(probs.data) + b * probs.strides[0], vocab,
                                      static_cast<const int32_t*>(top_k.data)[b], static_cast<const float*>(top_p.data)[b],
                                      uniform(seed, b), &argmax);
    out[b] = pick(b, token, argmax);
  }
  return 0;
}
