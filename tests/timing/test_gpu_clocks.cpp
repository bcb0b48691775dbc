// The throttle decision on injected NVML readings; the sensor's own behaviour without a GPU.
#include "timing/gpu_clocks.hpp"

#include <gtest/gtest.h>

using namespace d2k;

namespace {

// An H200 at work: SM 1980 MHz, its application and maximum clock.
ClockReading busy(unsigned sm_mhz = 1980, uint64_t reasons = 0) {
  ClockReading r;
  r.sm_mhz = sm_mhz;
  r.sm_max_mhz = 1980;
  r.sm_application_mhz = 1980;
  r.memory_mhz = 3201;
  r.temperature_c = 41;
  r.power_w = 312.5;
  r.throttle_reasons = reasons;
  return r;
}

ClockReading idle() {
  ClockReading r = busy(345, throttle::kGpuIdle);
  r.power_w = 75;
  return r;
}

}  // namespace

TEST(GpuClocks, AGpuAtItsClockIsNotThrottled) {
  GpuClocks clocks = judge_clocks(idle(), busy());
  EXPECT_TRUE(clocks.available);
  EXPECT_FALSE(clocks.throttled);
  EXPECT_TRUE(clocks.warning.empty());
  EXPECT_TRUE(clocks.reasons.empty()) << "idle is not a throttle reason";
  EXPECT_EQ(clocks.after.sm_mhz, 1980u);
  EXPECT_EQ(clocks.before.sm_mhz, 345u);
  // 90% of the application clock is still fine; boost clocks above it too.
  EXPECT_FALSE(judge_clocks(idle(), busy(1782)).throttled);
  EXPECT_FALSE(judge_clocks(idle(), busy(1980, throttle::kApplicationsClocksSetting)).throttled);
}

TEST(GpuClocks, PowerAndThermalReasonsAreThrottling) {
  for (uint64_t reason : {throttle::kSwPowerCap, throttle::kHwSlowdown, throttle::kSwThermalSlowdown,
                          throttle::kHwThermalSlowdown, throttle::kHwPowerBrakeSlowdown}) {
    GpuClocks clocks = judge_clocks(idle(), busy(1980, reason));
    EXPECT_TRUE(clocks.throttled) << reason;
    EXPECT_EQ(clocks.reasons.size(), 1u) << reason;
    EXPECT_NE(clocks.warning.find(clocks.reasons[0]), std::string::npos) << clocks.warning;
  }
  // Seen before the timed calls only: the GPU was already hot.
  GpuClocks hot = judge_clocks(busy(1980, throttle::kSwThermalSlowdown), busy());
  EXPECT_TRUE(hot.throttled);
  EXPECT_EQ(hot.reasons, std::vector<std::string>{"sw_thermal_slowdown"});
}

TEST(GpuClocks, ALowClockWhileBusyIsThrottling) {
  GpuClocks clocks = judge_clocks(idle(), busy(1410));
  EXPECT_TRUE(clocks.throttled);
  EXPECT_NE(clocks.warning.find("1410 MHz"), std::string::npos) << clocks.warning;
  EXPECT_NE(clocks.warning.find("application clock 1980 MHz"), std::string::npos) << clocks.warning;
  EXPECT_NE(clocks.warning.find("41 C"), std::string::npos) << clocks.warning;
  // Without an application clock the maximum is the reference.
  ClockReading no_application = busy(1410);
  no_application.sm_application_mhz = 0;
  EXPECT_NE(judge_clocks(idle(), no_application).warning.find("maximum clock 1980"), std::string::npos);
  // Idle by the time of the reading: a low clock says nothing about the calls.
  EXPECT_FALSE(judge_clocks(idle(), idle()).throttled);
  // Nothing to compare with: no verdict on the clock.
  ClockReading unknown = busy(1000);
  unknown.sm_application_mhz = unknown.sm_max_mhz = 0;
  EXPECT_FALSE(judge_clocks(idle(), unknown).throttled);
}

TEST(GpuClocks, ReasonNamesFollowNvmlBits) {
  EXPECT_EQ(throttle_reason_names(throttle::kGpuIdle), std::vector<std::string>{});
  EXPECT_EQ(throttle_reason_names(throttle::kSwPowerCap | throttle::kHwThermalSlowdown | throttle::kGpuIdle),
            (std::vector<std::string>{"sw_power_cap", "hw_thermal_slowdown"}));
  EXPECT_EQ(throttle_reason_names(0x4), std::vector<std::string>{"sw_power_cap"});
  EXPECT_EQ(throttle_reason_names(0x40), std::vector<std::string>{"hw_thermal_slowdown"});
}

TEST(GpuClocks, TheSensorNeverThrowsAndSaysWhyItCannotRead) {
  ClockSensor sensor;
  if (sensor.available()) GTEST_SKIP() << "NVML and a GPU are here; test_timing_gpu covers the readings";
  EXPECT_FALSE(sensor.unavailable().empty());
  EXPECT_FALSE(sensor.read());
  GpuClocks clocks = unavailable_clocks(sensor.unavailable());
  EXPECT_FALSE(clocks.available);
  EXPECT_FALSE(clocks.throttled);
  EXPECT_EQ(clocks.unavailable, sensor.unavailable());
}
