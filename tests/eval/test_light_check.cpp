// The speed-of-light policy (eval/checks.hpp faster_than_light): which medians under the floor are
// rejected and which only warned about, on a GPU with cold inputs.
#include <gtest/gtest.h>

#include "eval/checks.hpp"

namespace d2k {
namespace {

// The H200's ceilings as d2k measured them on 2026-12-02, with what bounds its matrix and memory rates.
Ceilings h200() {
  return Ceilings{.copy_gbps = 4207.0, .read_gbps = 4399.0, .bf16_tflops = 780.0, .fp8_tflops = 1494.0,
                  .int8_tops = 1490.0, .sm_count = 132, .sm_max_mhz = 1980, .compute_capability = 90,
                  .memory_max_mhz = 3201, .memory_bus_bits = 6016};
}

constexpr int kRotated = 4;  // rotation sets: the inputs were cold
constexpr int64_t kRotationBytes = int64_t{4} << 30;

TEST(LightCheck, AGemmFasterThanTheMeasuredMatrixRateIsWarnedAboutNotRejected) {
  // quant/int8_gemm M 2000 N 28672 K 4096 in 0.3088 ms on the H200: 1521 TOP/s, 2% over the measured rate.
  const double ops = 2.0 * 2000 * 28672 * 4096, bytes = 2000.0 * 4096 + 28672.0 * 4096 + 2000.0 * 28672 * 2;
  const auto light = faster_than_light(0.3088, ops, bytes, h200(), DType::i8, Device::cuda, kRotated, kRotationBytes);
  EXPECT_FALSE(light.rejected.has_value()) << *light.rejected;
  ASSERT_TRUE(light.warning.has_value());
  EXPECT_NE(light.warning->find("faster than the measured rate, within the device's bound"), std::string::npos)
      << *light.warning;
}

TEST(LightCheck, AGemmFasterThanTheDevicesBoundIsRejected) {
  // The same product in 0.2 ms would be 2349 TOP/s: more than every tensor core at 1980 MHz does.
  const double ops = 2.0 * 2000 * 28672 * 4096;
  const auto light = faster_than_light(0.2, ops, 1e6, h200(), DType::i8, Device::cuda, kRotated, kRotationBytes);
  ASSERT_TRUE(light.rejected.has_value());
  EXPECT_NE(light.rejected->find("bound of 2141 TFLOP/s"), std::string::npos) << *light.rejected;
}

TEST(LightCheck, AMemoryBoundKernelAtTheMeasuredReadRateIsWarnedAboutNotRejected) {
  // moe/sum_reduce deepseek-v3-T8192 on an H200 (2026-12-02, a campaign's expert run): 1057 MB in 0.2391
  // ms, 100.1% of the 4415 GB/s that machine's read kernel measured; 92% of the bus's 4814 GB/s.
  Ceilings measured = h200();
  measured.read_gbps = 4415.0;
  const auto light = faster_than_light(0.2391, 1e6, 1057e6, measured, DType::bf16, Device::cuda, kRotated, kRotationBytes);
  EXPECT_FALSE(light.rejected.has_value()) << *light.rejected;
  ASSERT_TRUE(light.warning.has_value());
  EXPECT_NE(light.warning->find("4415 GB/s (reading)"), std::string::npos) << *light.warning;
}

TEST(LightCheck, AMemoryBoundKernelUnderTheBussBoundIsRejected) {
  // 1 GB at the bus's 3201 MHz x 2 x 6016 bits = 4814 GB/s takes 0.2077 ms; 0.2 ms is impossible whatever
  // the matrix bound.
  const auto light = faster_than_light(0.2, 1e6, 1e9, h200(), DType::bf16, Device::cuda, kRotated, kRotationBytes);
  ASSERT_TRUE(light.rejected.has_value());
  EXPECT_NE(light.rejected->find("memory bound of 4814 GB/s: a 6016-bit bus at 3201 MHz"), std::string::npos)
      << *light.rejected;
}

TEST(LightCheck, WithoutAMemoryBoundTheMeasuredReadRateRejects) {
  // A cache or device without the memory's clock and bus width: the measured rate is all there is.
  Ceilings unknown = h200();
  unknown.memory_bus_bits = 0;
  const auto light = faster_than_light(0.22, 1e6, 1e9, unknown, DType::bf16, Device::cuda, kRotated, kRotationBytes);
  ASSERT_TRUE(light.rejected.has_value());
  EXPECT_NE(light.rejected->find("measured memory bandwidth of 4399 GB/s"), std::string::npos) << *light.rejected;
}

TEST(LightCheck, WithoutABoundTheMeasuredRateStillRejects) {
  // A device whose matrix rate per clock d2k does not know: the measured rate is all there is.
  Ceilings unknown = h200();
  unknown.compute_capability = 0;
  const double ops = 2.0 * 2000 * 28672 * 4096;
  const auto light = faster_than_light(0.3088, ops, 1e6, unknown, DType::i8, Device::cuda, kRotated, kRotationBytes);
  EXPECT_TRUE(light.rejected.has_value());
}

}  // namespace
}  // namespace d2k
