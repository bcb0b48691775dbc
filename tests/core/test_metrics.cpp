#include "core/metrics.hpp"

#include <gtest/gtest.h>

namespace d2k {
namespace {

TEST(Metrics, MemoryBoundWorkload) {
  // 67.1 MB at 4203 GB/s is a 15.97 us floor; 18.2 us achieved is 87.7% of it.
  const Ceiling h200{4203.0, 773.0};
  const TimingSummary solution{0.0182, 0, 0, 0, 0, 10};
  const TimingSummary eager{0.1451, 0, 0, 0, 0, 10};
  const auto p = performance_of(solution, eager, 5.0 * 2048 * 4096, 67117056.0, h200);
  EXPECT_NEAR(*p.speedup, 0.1451 / 0.0182, 1e-9);
  EXPECT_NEAR(p.achieved_gbps, 67117056.0 / 0.0182e-3 / 1e9, 1e-6);
  EXPECT_NEAR(*p.sol_fraction, (67117056.0 / 4203e9 * 1e3) / 0.0182, 1e-9);
}

TEST(Metrics, ComputeBoundFloorWins) {
  const Ceiling c{4000.0, 800.0};
  // 1 TFLOP over 1 MB: the compute floor (1.25 ms) is far above the memory floor.
  EXPECT_NEAR(floor_ms(1e12, 1e6, c), 1.25, 1e-12);
}

TEST(Metrics, NoBaselineNoSpeedupAndNoCeilingNoSol) {
  const auto p = performance_of(TimingSummary{1.0, 0, 0, 0, 0, 1}, std::nullopt, 0, 1e6, Ceiling{});
  EXPECT_FALSE(p.speedup.has_value());
  EXPECT_FALSE(p.sol_fraction.has_value());
}

TEST(Metrics, Geomean) {
  EXPECT_FALSE(geomean({}).has_value());
  EXPECT_NEAR(*geomean({2.0, 8.0}), 4.0, 1e-12);
}

}  // namespace
}  // namespace d2k
