#include "core/summary.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/json.hpp"

namespace d2k {
namespace {

// A passed trace whose solution ran `speedup` times faster than eager.
Trace faster(const std::string& workload, double speedup) {
  return {.task = "t/a", .workload = workload, .status = Status::passed,
          .performance = Performance{.solution = {.median_ms = 1.0}, .speedup = speedup},
          .phases = {{.name = "worker", .seconds = 0.5}, {.name = "solution_timing", .seconds = 0.25}},
          .wall_seconds = 1.0};
}

TEST(Summary, CountsPassesAndTakesTheGeomeanOfPassedTracesOnly) {
  auto wrong = faster("w3", 100.0);
  wrong.status = Status::incorrect_numerics;  // its speedup must not lift the geomean
  const std::vector<Trace> traces = {faster("w1", 2.0), faster("w2", 8.0), wrong,
                                     {.task = "t/a", .workload = "w4", .status = Status::passed}};  // untimed
  const auto summary = summarize_run(traces);
  EXPECT_EQ(summary.passed, 3);
  EXPECT_EQ(summary.total, 4);
  ASSERT_TRUE(summary.geomean_speedup);
  EXPECT_DOUBLE_EQ(*summary.geomean_speedup, 4.0);
  EXPECT_FALSE(summary.all_passed());
  EXPECT_EQ(summary.throttled, 0);
}

TEST(Summary, CountsThrottledTracesWhateverTheirStatus) {
  auto hot = faster("w1", 2.0);
  hot.clocks = GpuClocks{.available = true, .throttled = true, .warning = "thermal"};
  auto hot_failed = hot;
  hot_failed.status = Status::timeout;
  auto cool = faster("w2", 2.0);
  cool.clocks = GpuClocks{.available = true};
  const auto summary = summarize_run({hot, hot_failed, cool});
  EXPECT_EQ(summary.throttled, 2);
  EXPECT_EQ(summary.passed, 2);
}

TEST(Summary, CarriesTheHarnessOverhead) {
  const auto summary = summarize_run({faster("w1", 2.0), faster("w2", 2.0)});
  EXPECT_EQ(summary.overhead.workloads, 2);
  EXPECT_DOUBLE_EQ(summary.overhead.wall_seconds, 2.0);
  EXPECT_DOUBLE_EQ(summary.overhead.solution_timing_seconds, 0.5);
  EXPECT_DOUBLE_EQ(summary.overhead.overhead_seconds, 1.5);
  EXPECT_EQ(summary.overhead.largest_phase, "worker");
  EXPECT_TRUE(summary.all_passed());
}

TEST(Summary, NothingRunIsNotAllPassed) {
  const auto summary = summarize_run({});
  EXPECT_EQ(summary.total, 0);
  EXPECT_FALSE(summary.geomean_speedup);
  EXPECT_FALSE(summary.all_passed());
}

TEST(Summary, JsonCarriesEveryField) {
  const nlohmann::json j = summarize_run({faster("w1", 2.0)});
  EXPECT_EQ(j.at("passed"), 1);
  EXPECT_EQ(j.at("total"), 1);
  EXPECT_DOUBLE_EQ(j.at("geomean_speedup").get<double>(), 2.0);
  EXPECT_EQ(j.at("throttled"), 0);
  EXPECT_EQ(j.at("overhead").at("workloads"), 1);
  EXPECT_TRUE(nlohmann::json(summarize_run({})).at("geomean_speedup").is_null());
}

}  // namespace
}  // namespace d2k
