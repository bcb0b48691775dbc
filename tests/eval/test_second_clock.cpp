#include <gtest/gtest.h>

#include "eval/checks.hpp"

namespace d2k {
namespace {

// Verification calls as the worker reports them: `before` ran before the timed loop, `after` after it;
// each call's events read what the device's records say (an honest timer).
SecondClockReport calls(std::vector<double> before, std::vector<double> after) {
  SecondClockReport second;
  second.available = true;
  second.before_calls = static_cast<int>(before.size());
  second.busy_ms = before;
  second.busy_ms.insert(second.busy_ms.end(), after.begin(), after.end());
  second.event_ms = second.busy_ms;
  return second;
}

TEST(SecondClock, AnHonestTimerAgreesWithTheDevicesRecords) {
  EXPECT_EQ(second_clock_disagrees(calls({1.0, 1.0, 1.0}, {1.0, 1.0, 1.0, 1.0, 1.0}), 1.02), std::nullopt);
}

// The H200 under a power cap (2026-12-03, attn/prefill_sliding_window mistral-7b-B1-T16384-W4095): the
// timed loop at 1980 MHz, median 1.544 ms; the calls after it at about 1770 MHz, 1.713 ms.
TEST(SecondClock, ACapThatSlowsTheCallsAfterTheLoopIsNoFinding) {
  EXPECT_EQ(second_clock_disagrees(calls({1.545, 1.543, 1.546}, {1.713, 1.712, 1.715, 1.713, 1.714}), 1.544),
            std::nullopt);
}

TEST(SecondClock, ACapThatSlowedTheCallsBeforeTheLoopIsNoFindingEither) {
  EXPECT_EQ(second_clock_disagrees(calls({1.713, 1.712, 1.715}, {1.545, 1.543, 1.546, 1.544, 1.544}), 1.544),
            std::nullopt);
}

TEST(SecondClock, ATimerThatLiesOnlyInTheTimedLoopIsCaughtOnBothSides) {
  // The calls take 1.5 ms on both sides of the loop; the loop's timer reports a third less.
  const auto why = second_clock_disagrees(calls({1.5, 1.5, 1.5}, {1.5, 1.5, 1.5, 1.5, 1.5}), 1.0);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("the timer was not measuring the calls"), std::string::npos) << *why;
  EXPECT_NE(why->find("the faster of the calls before and after"), std::string::npos) << *why;
}

TEST(SecondClock, WithoutCallsBeforeTheLoopTheCallsAfterItDecide) {
  // A report of a worker that ran calls only after the loop (before_calls 0): as before the split.
  auto after_only = calls({}, {1.713, 1.712, 1.715, 1.713, 1.714});
  EXPECT_TRUE(second_clock_disagrees(after_only, 1.4));
  EXPECT_EQ(second_clock_disagrees(after_only, 1.6), std::nullopt);
}

TEST(SecondClock, EventsThatBracketLessThanTheDevicesWorkAreCaught) {
  // The verification calls' own events say 0.5 ms where the device worked 1.5 ms (a timer that lies
  // everywhere, or events captured into a graph).
  auto lying = calls({1.5, 1.5, 1.5}, {1.5, 1.5, 1.5, 1.5, 1.5});
  lying.event_ms.assign(lying.busy_ms.size(), 0.5);
  EXPECT_TRUE(second_clock_disagrees(lying, 0.5));
}

}  // namespace
}  // namespace d2k
