#include "eval/phase_clock.hpp"

#include <gtest/gtest.h>

#include <thread>

using namespace d2k;

TEST(PhaseClock, ConsecutivePhasesAndTheWorkersSplit) {
  PhaseClock clock;
  clock.next("inputs");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  clock.next("worker");
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  // The worker measured 30 ms of its own inside the 60 ms: the rest is its start and exit.
  clock.split({{"worker_setup", 0.010}, {"solution_timing", 0.020}}, "worker_start");
  clock.next("check");
  clock.stop();
  clock.stop();  // twice is once
  const auto& phases = clock.phases();
  ASSERT_EQ(phases.size(), 5u);
  EXPECT_EQ(phases[0].name, "inputs");
  EXPECT_GE(phases[0].seconds, 0.019);
  EXPECT_EQ(phases[1].name, "worker_start");
  EXPECT_GE(phases[1].seconds, 0.029);
  EXPECT_EQ(phases[2].name, "worker_setup");
  EXPECT_EQ(phases[3].name, "solution_timing");
  EXPECT_EQ(phases[4].name, "check");
}

TEST(PhaseClock, AWorkerClaimingMoreThanItsWallTimeLeavesNoNegativeRest) {
  PhaseClock clock;
  clock.next("worker");
  clock.split({{"solution_timing", 5.0}}, "worker_start");
  ASSERT_EQ(clock.phases().size(), 2u);
  EXPECT_EQ(clock.phases()[0].seconds, 0.0);
}
