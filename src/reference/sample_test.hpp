// The `sample` metric: an integer output drawn at random (sample/top_k_top_p's token ids), whose oracle is
// the distribution each element is drawn from (docs/metrics.md). One call's draws must lie in the support;
// many seeded calls' draws must follow the distribution, by a test whose false-alarm rate is bounded.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "core/trace.hpp"

namespace d2k {

// The chance that an exact sampler fails the distribution test of one evaluation of one workload, at
// most (a union bound over the test's three parts, each given a third). A bench of 20 runs of 10 such
// workloads then raises a false alarm with probability at most 2e-3.
inline constexpr double kSampleFalseAlarm = 1e-5;

// One call: `got` holds the draws (any integer dtype, shape S), `distribution` the probability of each
// value (shape S x n, float64, rows summing to 1). Passes when every draw is a value in [0, n) of
// positive probability; mismatches counts the others and detail names the first.
Comparison compare_sample(const std::string& name, const at::Tensor& got, const at::Tensor& distribution);

struct SampleTestResult {
  bool passed = false;
  int64_t calls = 0, draws = 0;  // calls x rows
  int64_t outside = 0;           // draws outside the support
  // (1) Kolmogorov-Smirnov over all draws of their randomized probability integral transforms: with
  // F(x-) the mass of the values before x in the row's order (descending probability, then index) and
  // U = F(x-) + V q(x), V uniform in [0, 1) from the checker's own generator, an exact sampler's U are
  // independent and uniform; ks = sqrt(n) sup |F_n(u) - u|, rejected above ks_bound (DKW with
  // Massart's constant: P(ks > l) <= 2 exp(-2 l^2)).
  double ks = 0, ks_bound = 0;
  // (2) How often a row's most probable value (all of them where several tie) was drawn, against the
  // expected count: rejected when the excess is above its Bernstein bound (draws are independent
  // Bernoulli trials of known means). What a sampler biased toward the argmax shows first.
  int64_t argmax = 0;
  double argmax_expected = 0, argmax_bound = 0;
  // (3) Repeats: over disjoint pairs of consecutive calls (0 and 1, 2 and 3, ...), how often a row drew
  // the same value twice, against sum q^2 per pair, with the same Bernstein bound. What a sampler that
  // ignores its seed shows: the same draws call after call.
  int64_t repeats = 0;
  double repeats_expected = 0, repeats_bound = 0;
  std::string detail;  // why it failed, in words
};

// The distribution test. The distribution (rows x n, float64, any device) is prepared once; each test
// takes `draws` (calls x rows, integers, any device) and the false-alarm rate to hold.
class SampleTest {
 public:
  explicit SampleTest(const at::Tensor& distribution);
  SampleTestResult operator()(const at::Tensor& draws, double false_alarm, uint64_t seed) const;

 private:
  at::Tensor distribution_;  // rows x n
  at::Tensor before_;        // rows x n: the mass before each place in that order (exclusive cumsum)
  at::Tensor top_;           // rows: the largest probability of the row
  at::Tensor top_mass_;      // rows: the mass of the values of that probability
  at::Tensor square_mass_;   // rows: sum q^2, the chance that two draws repeat
};

}  // namespace d2k
