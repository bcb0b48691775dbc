#include "core/overhead.hpp"

#include <gtest/gtest.h>

#include <random>

#include "core/json.hpp"

using namespace d2k;

namespace {

Trace trace_with(std::vector<Phase> phases, double wall) {
  Trace t;
  t.phases = std::move(phases);
  t.wall_seconds = wall;
  return t;
}

}  // namespace

TEST(Overhead, TimingIsTheMeasurementAndTheRestIsOverhead) {
  std::vector<Trace> traces = {
      trace_with({{"inputs", 2.0}, {"worker_setup", 0.5}, {"solution_timing", 1.0}, {"check", 1.5},
                  {"baseline_timing", 0.75}},
                 6.0),
      trace_with({{"inputs", 0.25}, {"check", 3.0}, {"solution_timing", 0.5}}, 4.0),
  };
  Overhead o = overhead_of(traces);
  EXPECT_EQ(o.workloads, 2);
  EXPECT_DOUBLE_EQ(o.wall_seconds, 10.0);
  EXPECT_DOUBLE_EQ(o.solution_timing_seconds, 1.5);
  EXPECT_DOUBLE_EQ(o.baseline_timing_seconds, 0.75);
  EXPECT_DOUBLE_EQ(o.overhead_seconds, 7.75);  // unaccounted gaps between phases are overhead too
  EXPECT_EQ(o.largest_phase, "check");        // 4.5 s over both traces; inputs 2.25 s
  EXPECT_DOUBLE_EQ(o.largest_phase_seconds, 4.5);
  EXPECT_EQ(describe(o),
            "harness: 10.0 s wall for 2 workloads; timing 2.2 s (solution 1.5 s, baseline 0.8 s); overhead 7.8 s "
            "(78%), most of it check 4.5 s");
  const auto j = nlohmann::json(o);
  EXPECT_DOUBLE_EQ(j.at("overhead_seconds").get<double>(), 7.75);
  EXPECT_EQ(j.at("largest_phase"), "check");
}

TEST(Overhead, NothingMeasuredIsNoOverhead) {
  Overhead o = overhead_of({});
  EXPECT_EQ(o.workloads, 0);
  EXPECT_DOUBLE_EQ(o.overhead_seconds, 0.0);
  EXPECT_TRUE(o.largest_phase.empty());
  EXPECT_EQ(describe(o), "harness: 0.0 s wall for 0 workloads; timing 0.0 s (solution 0.0 s, baseline 0.0 s); overhead 0.0 s");
}

// Random phase lists: the overhead plus the timing is always the wall time, whatever the phases.
TEST(Overhead, AddsUpOnRandomTraces) {
  std::mt19937 random(5);
  std::uniform_real_distribution<double> seconds(0.0, 3.0);
  const char* names[] = {"inputs", "oracle", "check", "solution_timing", "baseline_timing", "worker_start"};
  std::vector<Trace> traces;
  double timing = 0, wall = 0;
  for (int i = 0; i < 20; ++i) {
    std::vector<Phase> phases;
    double sum = 0;
    for (const char* name : names) {
      phases.push_back({name, seconds(random)});
      sum += phases.back().seconds;
      if (std::string(name).ends_with("_timing")) timing += phases.back().seconds;
    }
    traces.push_back(trace_with(phases, sum + 0.01));
    wall += sum + 0.01;
  }
  Overhead o = overhead_of(traces);
  EXPECT_NEAR(o.wall_seconds, wall, 1e-9);
  EXPECT_NEAR(o.overhead_seconds + o.solution_timing_seconds + o.baseline_timing_seconds, wall, 1e-9);
  EXPECT_NEAR(o.solution_timing_seconds + o.baseline_timing_seconds, timing, 1e-9);
  EXPECT_NE(o.largest_phase.find_first_not_of(' '), std::string::npos);
  EXPECT_FALSE(o.largest_phase.ends_with("_timing"));
}
