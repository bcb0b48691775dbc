// The report's statistics against hand-worked examples.
#include <gtest/gtest.h>

#include <cmath>

#include "campaign/stats.hpp"

namespace d2k::campaign {
namespace {

TEST(Stats, BootstrapIsReproducibleAndMatchesTheExactResamplingDistribution) {
  // {1, 2, 3}: the 27 equally likely resamples have means from 1 (1 way, 3.7%) to 3 (1 way, 3.7%); the
  // 2.5% and 97.5% quantiles of the means are therefore 1 and 3 exactly.
  const auto a = bootstrap_mean_interval({1, 2, 3}, 42, 20000);
  const auto b = bootstrap_mean_interval({1, 2, 3}, 42, 20000);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->low, b->low);
  EXPECT_EQ(a->high, b->high);
  EXPECT_DOUBLE_EQ(a->low, 1.0);
  EXPECT_DOUBLE_EQ(a->high, 3.0);
  // At the 50% level: the 25% and 75% quantiles of the means. P(mean <= 5/3) = 10/27 = 37%, P(mean <= 4/3)
  // = 4/27 = 15%: the 25% quantile is 5/3; by symmetry the 75% quantile is 7/3.
  const auto half = bootstrap_mean_interval({1, 2, 3}, 7, 20000, 0.5);
  EXPECT_NEAR(half->low, 5.0 / 3, 1e-12);
  EXPECT_NEAR(half->high, 7.0 / 3, 1e-12);
  // A constant set: no spread.
  const auto flat = bootstrap_mean_interval({0.25, 0.25, 0.25, 0.25}, 1, 1000);
  EXPECT_DOUBLE_EQ(flat->low, 0.25);
  EXPECT_DOUBLE_EQ(flat->high, 0.25);
  EXPECT_FALSE(bootstrap_mean_interval({}, 1));
}

TEST(Stats, AverageRanksShareTies) {
  const auto r = average_ranks({10, 20, 10, 30, 20, 20});
  EXPECT_EQ(r, (std::vector<double>{1.5, 4, 1.5, 6, 4, 4}));
}

TEST(Stats, SignedRankOnTheTextbookExample) {
  // Wikipedia's worked example (Wilcoxon signed-rank test): ten pairs, one tie dropped, n = 9, with two
  // tied magnitudes (5 and 5, rank 1.5 each). W+ = 18, W- = 27; the exact two-sided p is 2 x 162/512 (162 of the
  // 512 sign assignments of the 9 ranks give a sum at most 18), counted by enumeration outside this code.
  const std::vector<double> x1 = {125, 115, 130, 140, 140, 115, 140, 125, 140, 135};
  const std::vector<double> x2 = {110, 122, 125, 120, 140, 124, 123, 137, 135, 145};
  std::vector<double> d;
  for (std::size_t i = 0; i < x1.size(); ++i) d.push_back(x2[i] - x1[i]);
  const auto t = wilcoxon_signed_rank(d);
  EXPECT_EQ(t.n, 9);
  EXPECT_DOUBLE_EQ(t.w_plus, 18);
  EXPECT_DOUBLE_EQ(t.w_minus, 27);
  EXPECT_TRUE(t.exact);
  EXPECT_NEAR(t.p_value, 2 * 162.0 / 512, 1e-12);
  // n = 6, every difference positive: the smallest two-sided p for six pairs, 2 / 2^6.
  const auto all = wilcoxon_signed_rank({0.1, 0.2, 0.3, 0.4, 0.5, 0.6});
  EXPECT_DOUBLE_EQ(all.w_plus, 21);
  EXPECT_DOUBLE_EQ(all.w_minus, 0);
  EXPECT_NEAR(all.p_value, 0.03125, 1e-12);
  // Symmetric differences: no evidence at all.
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank({-1, 1, -2, 2}).p_value, 1.0);
}

TEST(Stats, SignedRankNormalApproximationAgreesWithTheExactTailForLargeN) {
  // 60 differences 1..60 with the first 20 negative: W- = 210, W+ = 1620. The normal approximation
  // (mean n(n+1)/4 = 915, sd sqrt(n(n+1)(2n+1)/24) = 136.01) with continuity correction gives z = 5.18.
  std::vector<double> d;
  for (int i = 1; i <= 60; ++i) d.push_back(i <= 20 ? -i : i);
  const auto t = wilcoxon_signed_rank(d);
  EXPECT_FALSE(t.exact);
  EXPECT_DOUBLE_EQ(t.w_minus, 210);
  const double z = (1620 - 915 - 0.5) / std::sqrt(60.0 * 61 * 121 / 24);
  EXPECT_NEAR(t.p_value, std::erfc(z / std::sqrt(2.0)), 1e-12);
  EXPECT_LT(t.p_value, 1e-6);
}

TEST(Stats, SpearmanOnAHandExample) {
  // Ranks x: 1 2 3 4 5, y: 2 1 4 3 5 -> d^2 = 1+1+1+1+0 = 4; rho = 1 - 6*4 / (5*24) = 0.8.
  EXPECT_NEAR(*spearman({1, 2, 3, 4, 5}, {20, 10, 40, 30, 50}), 0.8, 1e-12);
  EXPECT_NEAR(*spearman({1, 2, 3}, {3, 2, 1}), -1.0, 1e-12);
  EXPECT_FALSE(spearman({1, 2}, {1, 2}));
  EXPECT_FALSE(spearman({1, 2, 3}, {5, 5, 5}));
}

}  // namespace
}  // namespace d2k::campaign
