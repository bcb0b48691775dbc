// The GPU's clocks, temperature, power and throttle reasons, read through NVML. NVML is loaded at run
// time (dlopen of libnvidia-ml.so.1, the driver's library), so d2k builds and runs where it is absent:
// the reading then says why it is unavailable. d2k only reads clocks; it never sets one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/trace.hpp"

namespace d2k {

// NVML's clock event ("throttle") reason bits, as nvml.h numbers them.
namespace throttle {
inline constexpr uint64_t kGpuIdle = 0x1;
inline constexpr uint64_t kApplicationsClocksSetting = 0x2;
inline constexpr uint64_t kSwPowerCap = 0x4;
inline constexpr uint64_t kHwSlowdown = 0x8;
inline constexpr uint64_t kSyncBoost = 0x10;
inline constexpr uint64_t kSwThermalSlowdown = 0x20;
inline constexpr uint64_t kHwThermalSlowdown = 0x40;
inline constexpr uint64_t kHwPowerBrakeSlowdown = 0x80;
inline constexpr uint64_t kDisplayClockSetting = 0x100;
// The reasons that mean the GPU ran slower than it could: power or heat.
inline constexpr uint64_t kSlowing =
    kSwPowerCap | kHwSlowdown | kSwThermalSlowdown | kHwThermalSlowdown | kHwPowerBrakeSlowdown;
}  // namespace throttle

// A timed call's SM clock below this fraction of the GPU's application (or else maximum) clock counts
// as throttled.
inline constexpr double kLowClockFraction = 0.9;

// The names of the set reason bits ("sw_power_cap", ...), idle left out: a GPU waiting for work is idle.
std::vector<std::string> throttle_reason_names(uint64_t bits);

// The verdict on readings taken before and after the timed calls: throttled when either shows a power
// or thermal reason, or when the SM clock after the calls (unless idle by then) is below
// kLowClockFraction of the application clock. `available` is set; the warning is for a person.
GpuClocks judge_clocks(const ClockReading& before, const ClockReading& after);

// An unavailable reading: the trace says why.
GpuClocks unavailable_clocks(std::string why);

// NVML for the current CUDA device. Never throws: when NVML or the device cannot be reached, read()
// returns nothing and unavailable() says why.
class ClockSensor {
 public:
  ClockSensor();
  ~ClockSensor();
  ClockSensor(const ClockSensor&) = delete;
  ClockSensor& operator=(const ClockSensor&) = delete;

  bool available() const { return unavailable_.empty(); }
  const std::string& unavailable() const { return unavailable_; }
  std::optional<ClockReading> read() const;

 private:
  struct Nvml;
  std::unique_ptr<Nvml> nvml_;
  std::string unavailable_;
};

}  // namespace d2k
