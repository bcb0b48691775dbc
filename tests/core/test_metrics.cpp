#include "core/metrics.hpp"

#include <gtest/gtest.h>

namespace d2k {
namespace {

TEST(Metrics, MemoryBoundWorkload) {
  // 67.1 MB at 4203 GB/s is a 15.97 us floor; 18.2 us achieved is 87.7% of it.
  const Ceilings h200{.copy_gbps = 4203.0, .bf16_tflops = 773.0};
  const TimingSummary solution{0.0182, 0, 0, 0, 0, 10};
  const TimingSummary eager{0.1451, 0, 0, 0, 0, 10};
  const auto p = performance_of(solution, eager, 5.0 * 2048 * 4096, 67117056.0, h200);
  EXPECT_NEAR(*p.speedup, 0.1451 / 0.0182, 1e-9);
  EXPECT_NEAR(p.achieved_gbps, 67117056.0 / 0.0182e-3 / 1e9, 1e-6);
  EXPECT_NEAR(*p.sol_fraction, (67117056.0 / 4203e9 * 1e3) / 0.0182, 1e-9);
}

// The memory floor is at the faster of the copy and read rates: a kernel that reads 8 bytes for each one
// it writes (the H200 measured 4218 GB/s copying) can beat the copy rate, not the read rate.
TEST(Metrics, TheMemoryFloorIsAtTheFasterOfTheCopyAndReadRates) {
  Ceilings c{.copy_gbps = 4000.0, .read_gbps = 4500.0};
  EXPECT_DOUBLE_EQ(c.memory_gbps(), 4500.0);
  EXPECT_NEAR(floor_ms(0, 4.5e9, c), 1.0, 1e-12);
  // 0.95 ms for 4.5 GB beats the copy rate's 1.125 ms floor but not the read rate's 1 ms.
  const auto why = below_floor(0.95, 1.0, 0, 4.5e9, c);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("4500 MB at the measured memory bandwidth of 4500 GB/s (reading)"), std::string::npos) << *why;
  EXPECT_FALSE(below_floor(1.0, 1.0, 0, 4.5e9, c).has_value());
  c.read_gbps = 0;  // unknown: the copy rate alone
  EXPECT_NEAR(floor_ms(0, 4.5e9, c), 1.125, 1e-12);
}

TEST(Metrics, TheLibraryBaselineAndTheSpeedupOverIt) {
  auto p = performance_of(TimingSummary{.median_ms = 0.02}, TimingSummary{.median_ms = 0.2}, 0, 1e6, Ceilings{});
  add_library(p, std::nullopt);
  EXPECT_FALSE(p.library.has_value());
  EXPECT_FALSE(p.speedup_over_library.has_value());
  add_library(p, TimingSummary{.median_ms = 0.025});
  ASSERT_TRUE(p.library.has_value());
  EXPECT_EQ(p.library->median_ms, 0.025);
  EXPECT_NEAR(*p.speedup_over_library, 1.25, 1e-12);  // the expert must beat it: above 1
  EXPECT_NEAR(*p.speedup, 10.0, 1e-12);               // eager's is unchanged
}

TEST(Metrics, ComputeBoundFloorWins) {
  const Ceilings c{.copy_gbps = 4000.0, .bf16_tflops = 800.0};
  // 1 TFLOP over 1 MB: the compute floor (1.25 ms) is far above the memory floor.
  EXPECT_NEAR(floor_ms(1e12, 1e6, c), 1.25, 1e-12);
}

TEST(Metrics, NoBaselineNoSpeedupAndNoCeilingNoSol) {
  const auto p = performance_of(TimingSummary{.median_ms = 1.0, .samples = 1}, std::nullopt, 0, 1e6, Ceilings{});
  EXPECT_FALSE(p.speedup.has_value());
  EXPECT_FALSE(p.sol_fraction.has_value());
}

TEST(Metrics, TheComputeFloorUsesTheTasksMatrixRate) {
  Ceilings c{.copy_gbps = 4000.0, .bf16_tflops = 800.0};
  c.fp8_tflops = 1600.0;
  c.int8_tops = 1500.0;
  // 16 TFLOP over 1 MB: 20 ms at the bf16 rate, 10 ms at fp8, 10.67 ms at int8.
  EXPECT_NEAR(floor_ms(16e12, 1e6, c), 20.0, 1e-9);
  EXPECT_NEAR(floor_ms(16e12, 1e6, c, DType::f8e4m3), 10.0, 1e-9);
  EXPECT_NEAR(floor_ms(16e12, 1e6, c, DType::i8), 16e12 / 1500e12 * 1e3, 1e-9);
  const auto p = performance_of(TimingSummary{.median_ms = 20.0, .samples = 1}, std::nullopt, 16e12, 1e6, c, DType::f8e4m3);
  EXPECT_NEAR(*p.sol_fraction, 0.5, 1e-12);
  // An unmeasured rate leaves only the memory floor.
  c.int8_tops.reset();
  EXPECT_NEAR(floor_ms(16e12, 4e9, c, DType::i8), 1.0, 1e-12);
}

TEST(Metrics, BelowFloorSaysHowFarBelowWithTheNumbers) {
  const Ceilings h200{.copy_gbps = 4000.0, .bf16_tflops = 800.0};
  // 67.1 MB at 4000 GB/s: a floor of 16.78 us.
  const double bytes = 67108864.0, floor = bytes / 4000e9 * 1e3;
  EXPECT_FALSE(below_floor(floor, 1.0, 0, bytes, h200).has_value());
  EXPECT_FALSE(below_floor(0.81 * floor, 0.8, 0, bytes, h200).has_value());
  EXPECT_TRUE(below_floor(0.99 * floor, 1.0, 0, bytes, h200).has_value());
  const auto why = below_floor(0.5 * floor, 0.8, 0, bytes, h200);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("is 50% of the speed-of-light floor of 0.01678 ms"), std::string::npos) << *why;
  EXPECT_NE(why->find("67.11 MB at the measured memory bandwidth of 4000 GB/s (copying)"), std::string::npos) << *why;
  EXPECT_NE(why->find("0.008389 ms"), std::string::npos) << *why;
  // Compute-bound: the reason names the rate and its dtype.
  const auto compute = below_floor(0.1, 1.0, 1e12, 1e6, h200);
  ASSERT_TRUE(compute.has_value());
  EXPECT_NE(compute->find("1000 GFLOP at the measured bf16 rate of 800 TFLOP/s"), std::string::npos) << *compute;
  // No ceiling, no floor: nothing is impossible.
  EXPECT_FALSE(below_floor(1e-9, 1.0, 1e12, 1e9, Ceilings{}).has_value());
}

TEST(Metrics, TheMatrixBoundIsTheTensorCoresAtTheHighestClock) {
  Ceilings h200{.copy_gbps = 4207.0, .bf16_tflops = 780.0, .fp8_tflops = 1494.0, .int8_tops = 1484.0};
  // Unknown until the device says its SMs, clock and architecture.
  EXPECT_FALSE(h200.matrix_bound(DType::i8).has_value());
  h200.sm_count = 132;
  h200.sm_max_mhz = 1980;
  h200.compute_capability = 90;
  // 132 SMs x 1980 MHz x 4096 (bf16) or 8192 (fp8, int8) per SM per clock.
  EXPECT_NEAR(*h200.matrix_bound(DType::bf16), 1070.530560, 1e-6);
  EXPECT_NEAR(*h200.matrix_bound(DType::f8e4m3), 2141.061120, 1e-6);
  EXPECT_NEAR(*h200.matrix_bound(DType::i8), 2141.061120, 1e-6);
  // At H100 SXM's 1830 MHz the same rates are its datasheet's dense 989 and 1979.
  Ceilings h100 = h200;
  h100.sm_max_mhz = 1830;
  EXPECT_NEAR(*h100.matrix_bound(DType::bf16), 989.4, 0.1);
  EXPECT_NEAR(*h100.matrix_bound(DType::i8), 1978.9, 0.1);
  // A100 (108 SMs at 1410 MHz): 312 dense bf16, 624 int8, no fp8 tensor cores.
  const Ceilings a100{.sm_count = 108, .sm_max_mhz = 1410, .compute_capability = 80};
  EXPECT_NEAR(*a100.matrix_bound(DType::bf16), 311.9, 0.1);
  EXPECT_NEAR(*a100.matrix_bound(DType::i8), 623.8, 0.1);
  EXPECT_FALSE(a100.matrix_bound(DType::f8e4m3).has_value());
  // An architecture whose rates are not written down here has no bound.
  Ceilings other = h200;
  other.compute_capability = 120;
  EXPECT_FALSE(other.matrix_bound(DType::bf16).has_value());
}

TEST(Metrics, AFloorAtTheBoundLetsAKernelBeatTheMeasuredMatrixRate) {
  const Ceilings h200{.copy_gbps = 4207.0, .bf16_tflops = 780.0, .int8_tops = 1490.0, .sm_count = 132,
                      .sm_max_mhz = 1980, .compute_capability = 90};
  // quant/int8_gemm at M 2000 N 28672 K 4096 (469.8 GOP) in 0.3088 ms, measured on the H200: 1521 TOP/s,
  // 2% over the measured int8 rate, 71% of the bound.
  const double ops = 2.0 * 2000 * 28672 * 4096, bytes = 2000.0 * 4096 + 28672.0 * 4096 + 2000.0 * 28672 * 2;
  EXPECT_TRUE(below_floor(0.3088, 1.0, ops, bytes, h200, DType::i8).has_value());
  EXPECT_FALSE(below_floor(0.3088, 1.0, ops, bytes, h200, DType::i8, FloorRate::bound).has_value());
  const double bound_floor = ops / 2141.06112e12 * 1e3;
  const auto why = below_floor(0.9 * bound_floor, 1.0, ops, bytes, h200, DType::i8, FloorRate::bound);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("at the device's i8 bound of 2141 TFLOP/s: 132 SMs at 1980 MHz"), std::string::npos) << *why;
  // Memory-bound, with no memory bound known: the matrix bound changes nothing.
  const double copy_floor = 1e9 / 4207e9 * 1e3;
  EXPECT_TRUE(below_floor(0.99 * copy_floor, 1.0, 1e6, 1e9, h200, DType::bf16, FloorRate::bound).has_value());
  // Without a bound the measured rate stands in for it.
  Ceilings unknown = h200;
  unknown.compute_capability = 0;
  EXPECT_TRUE(below_floor(0.3088, 1.0, ops, bytes, unknown, DType::i8, FloorRate::bound).has_value());
}

TEST(Metrics, TheMemoryBoundIsTheBusAtItsPeakClock) {
  Ceilings h200{.copy_gbps = 4207.0, .read_gbps = 4415.0};
  EXPECT_FALSE(h200.memory_bound_gbps().has_value());  // unknown until the device says its clock and bus
  h200.memory_max_mhz = 3201;
  h200.memory_bus_bits = 6016;  // what an H200 reported on 2026-12-02
  // 3201 MHz x 2 transfers x 752 bytes: the datasheet's 4.8 TB/s. H100 SXM (2619 MHz, 5120 bits): 3.35 TB/s.
  EXPECT_NEAR(*h200.memory_bound_gbps(), 4814.304, 1e-9);
  const Ceilings h100{.memory_max_mhz = 2619, .memory_bus_bits = 5120};
  EXPECT_NEAR(*h100.memory_bound_gbps(), 3352.32, 1e-9);
  // The floor every % of SOL is of stays at the measured rate; only the bound's floor moves.
  EXPECT_NEAR(floor_ms(0, 4.415e9, h200), 1.0, 1e-12);
  EXPECT_TRUE(below_floor(0.999, 1.0, 0, 4.415e9, h200).has_value());
  EXPECT_FALSE(below_floor(0.999, 1.0, 0, 4.415e9, h200, DType::bf16, FloorRate::bound).has_value());
  const auto why = below_floor(0.85, 1.0, 0, 4.415e9, h200, DType::bf16, FloorRate::bound);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("at the device's memory bound of 4814 GB/s: a 6016-bit bus at 3201 MHz"), std::string::npos)
      << *why;
}

TEST(Metrics, Geomean) {
  EXPECT_FALSE(geomean({}).has_value());
  EXPECT_NEAR(*geomean({2.0, 8.0}), 4.0, 1e-12);
}

}  // namespace
}  // namespace d2k
