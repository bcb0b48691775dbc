#include <gtest/gtest.h>

#include "eval/checks.hpp"

namespace d2k {
namespace {

// A report of `calls` timed calls of `reported_ms` each, whose timed loop took `timed_s` by the
// orchestrator's clock and `timed_cpu_s` by the kernel's count of CPU time, after a no-op loop of 10
// samples that took 10 ms by both (1 ms of the harness's own per call).
WorkerReport report(int calls, double reported_ms, double timed_s, std::optional<double> timed_cpu_s) {
  WorkerReport report;
  TimingReport timing;
  timing.samples_ms.assign(static_cast<std::size_t>(calls), reported_ms);
  timing.noop_samples = 10;
  report.timing = timing;
  report.noop_seconds = 0.010;
  report.timed_seconds = timed_s;
  if (timed_cpu_s) {
    report.noop_cpu_seconds = 0.010;
    report.timed_cpu_seconds = timed_cpu_s;
  }
  return report;
}

TEST(OutsideClock, AnHonestTimerAgreesAndTheNumbersAreRecorded) {
  // 100 calls of 20 ms each: 2 s of calls plus 0.1 s of the harness's own.
  const auto honest = report(100, 20.0, 2.1, 2.1);
  EXPECT_EQ(clock_disagrees(honest, Device::cpu), std::nullopt);
  const auto clock = outside_clock_of(honest);
  ASSERT_TRUE(clock);
  EXPECT_NEAR(clock->harness_ms, 1.0, 1e-9);
  EXPECT_NEAR(clock->implied_ms, 20.0, 1e-9);
  EXPECT_NEAR(clock->reported_ms, 20.0, 1e-9);
}

TEST(OutsideClock, ATimerRunningAtHalfSpeedIsRejected) {
  const auto forged = report(100, 10.0, 2.1, 2.1);
  const auto why = clock_disagrees(forged, Device::cpu);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("took 20 ms each beyond the harness's own 1 ms, but the worker reported 10 ms each"),
            std::string::npos)
      << *why;
}

TEST(OutsideClock, TheSmallerOfTheTwoClocksIsBelieved) {
  // A busy machine: the wall clock counts 4 s the worker spent descheduled; its CPU time does not.
  const auto busy = report(100, 20.0, 6.1, 2.1);
  EXPECT_EQ(clock_disagrees(busy, Device::cpu), std::nullopt);
  EXPECT_EQ(outside_clock_of(busy)->by, "cpu");
  // A call's own threads: the CPU time counts 4 threads, the wall clock one.
  const auto threaded = report(100, 20.0, 2.1, 8.1);
  EXPECT_EQ(clock_disagrees(threaded, Device::cpu), std::nullopt);
  EXPECT_EQ(outside_clock_of(threaded)->by, "wall");
  // Where the kernel keeps no CPU time, the wall clock alone.
  const auto wall_only = report(100, 10.0, 2.1, std::nullopt);
  EXPECT_TRUE(clock_disagrees(wall_only, Device::cpu));
}

TEST(OutsideClock, ShortCallsAreWithinTheSlack) {
  // 100 calls of 0.2 ms reported as 0.05 ms: below what the cpu device's 1 ms of slack can tell.
  EXPECT_EQ(clock_disagrees(report(100, 0.05, 0.12, 0.12), Device::cpu), std::nullopt);
}

TEST(OutsideClock, AHarnessSlowedByLoadDuringTheCallsIsMeasuredByTheLoopAfterThem) {
  // 100 calls of 0.05 ms, but the machine got busy after the first no-op loop: the harness's own work now
  // takes 5 ms a call by both clocks (waiting for a CPU counts on both), so the timed loop took 0.505 s.
  auto loaded = report(100, 0.05, 0.505, 0.505);
  ASSERT_TRUE(clock_disagrees(loaded, Device::cpu)) << "judged by the first loop alone, an honest timer looks forged";
  loaded.noop_after_seconds = 0.050;
  loaded.noop_after_cpu_seconds = 0.050;
  EXPECT_EQ(clock_disagrees(loaded, Device::cpu), std::nullopt);
  EXPECT_NEAR(outside_clock_of(loaded)->harness_ms, 5.0, 1e-9);
  // A timer at half speed is still caught when the loop after the calls is as fast as the one before.
  auto forged = report(100, 10.0, 2.1, 2.1);
  forged.noop_after_seconds = 0.008;
  forged.noop_after_cpu_seconds = 0.008;
  EXPECT_TRUE(clock_disagrees(forged, Device::cpu));
  EXPECT_NEAR(outside_clock_of(forged)->harness_ms, 1.0, 1e-9);
}

TEST(OutsideClock, MissingMarksAreThemselvesAFinding) {
  auto report_without_marks = report(10, 1.0, 0.02, 0.02);
  report_without_marks.timed_seconds.reset();
  EXPECT_EQ(outside_clock_of(report_without_marks), std::nullopt);
  EXPECT_TRUE(clock_disagrees(report_without_marks, Device::cpu));
}

}  // namespace
}  // namespace d2k
