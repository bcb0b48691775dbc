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
