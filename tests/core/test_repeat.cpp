#include "core/repeat.hpp"

#include <gtest/gtest.h>

namespace d2k {
namespace {

Trace timed(const std::string& workload, double median_ms, uint64_t seed) {
  Trace trace{.task = "t/a", .workload = workload, .status = Status::passed, .seed = seed};
  trace.performance = Performance{};
  trace.performance->solution.median_ms = median_ms;
  return trace;
}

TEST(Repeat, CountsPassesAndSpreadsOfMediansPerWorkload) {
  std::vector<std::vector<Trace>> runs = {
      {timed("w1", 0.100, 1), timed("w2", 1.0, 1)},
      {timed("w1", 0.104, 2), timed("w2", 1.0, 2)},
      {timed("w1", 0.102, 3), timed("w2", 1.0, 3)},
  };
  runs[1][1].status = Status::rejected;
  runs[1][1].message = "faster than the speed of light";
  const auto rows = summarize_repeats(runs);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].workload, "w1");
  EXPECT_EQ(rows[0].runs, 3);
  EXPECT_EQ(rows[0].passed, 3);
  EXPECT_DOUBLE_EQ(rows[0].median_ms, 0.102);
  EXPECT_NEAR(rows[0].spread, 0.004 / 0.102, 1e-12);
  EXPECT_EQ(rows[1].passed, 2);
  ASSERT_EQ(rows[1].failures.size(), 1u);
  EXPECT_EQ(rows[1].failures[0], "run 2 (seed 2): rejected: faster than the speed of light");
  EXPECT_DOUBLE_EQ(rows[1].spread, 0.0);
  EXPECT_EQ(rows[1].medians_ms.size(), 2u);
}

TEST(Repeat, UntimedRunsHaveNoMedians) {
  Trace untimed{.task = "t/a", .workload = "w", .status = Status::passed};
  const auto rows = summarize_repeats({{untimed}, {untimed}});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].passed, 2);
  EXPECT_TRUE(rows[0].medians_ms.empty());
  EXPECT_EQ(rows[0].spread, 0.0);
}

}  // namespace
}  // namespace d2k
