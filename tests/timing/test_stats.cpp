#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "timing/stats.hpp"

using d2k::summarize;
using d2k::TimingSummary;

TEST(Stats, SummarizesKnownSamples) {
  TimingSummary summary = summarize({5.0, 1.0, 4.0, 2.0, 3.0});
  EXPECT_DOUBLE_EQ(summary.median_ms, 3.0);
  EXPECT_DOUBLE_EQ(summary.min_ms, 1.0);
  EXPECT_DOUBLE_EQ(summary.mean_ms, 3.0);
  EXPECT_DOUBLE_EQ(summary.p10_ms, 1.4);  // 10% of the way from the first to the fifth
  EXPECT_DOUBLE_EQ(summary.p90_ms, 4.6);
  EXPECT_EQ(summary.samples, 5);

  TimingSummary even = summarize({8.0, 2.0, 4.0, 6.0});
  EXPECT_DOUBLE_EQ(even.median_ms, 5.0);
  EXPECT_DOUBLE_EQ(even.mean_ms, 5.0);

  TimingSummary one = summarize({0.25});
  EXPECT_DOUBLE_EQ(one.median_ms, 0.25);
  EXPECT_DOUBLE_EQ(one.p10_ms, 0.25);
  EXPECT_DOUBLE_EQ(one.p90_ms, 0.25);

  TimingSummary none = summarize({});
  EXPECT_EQ(none.samples, 0);
  EXPECT_DOUBLE_EQ(none.median_ms, 0.0);
}

TEST(Stats, MedianOfRandomOddSamplesIsTheMiddleElement) {
  std::mt19937 random(3);
  std::lognormal_distribution<double> times(0.0, 0.5);
  for (int n : {1, 3, 51, 201}) {
    std::vector<double> samples(static_cast<std::size_t>(n));
    for (double& t : samples) t = times(random);
    std::vector<double> sorted = samples;
    std::sort(sorted.begin(), sorted.end());
    TimingSummary summary = summarize(samples);
    EXPECT_DOUBLE_EQ(summary.median_ms, sorted[sorted.size() / 2]);
    EXPECT_DOUBLE_EQ(summary.min_ms, sorted.front());
    EXPECT_LE(summary.p10_ms, summary.median_ms);
    EXPECT_LE(summary.median_ms, summary.p90_ms);
    EXPECT_LE(summary.p90_ms, sorted.back());
  }
}

TEST(Stats, MedianIntervalBracketsTheMedianAndNarrowsWithMoreSamples) {
  std::vector<double> hundred, ten_thousand;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  for (int i = 1; i <= 10000; ++i) ten_thousand.push_back(i / 100.0);
  const auto [low, high] = d2k::median_ci95(hundred);
  EXPECT_LT(low, 50.5);
  EXPECT_GT(high, 50.5);
  EXPECT_NEAR(high - low, 2 * 0.98 * 10, 2.0);  // about 2 x 0.98 sqrt(n) ranks wide
  const auto [low2, high2] = d2k::median_ci95(ten_thousand);
  EXPECT_LT((high2 - low2) / 50.0, (high - low) / 50.5);
  const auto summary = d2k::summarize(hundred);
  EXPECT_DOUBLE_EQ(summary.ci_low_ms, low);
  EXPECT_DOUBLE_EQ(summary.ci_high_ms, high);
}
