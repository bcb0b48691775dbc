#include "timing/gpu_clocks.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <utility>

#include "timing/cuda_util.hpp"

namespace d2k {

std::vector<std::string> throttle_reason_names(uint64_t bits) {
  static const std::pair<uint64_t, const char*> kNames[] = {
      {throttle::kApplicationsClocksSetting, "applications_clocks_setting"},
      {throttle::kSwPowerCap, "sw_power_cap"},
      {throttle::kHwSlowdown, "hw_slowdown"},
      {throttle::kSyncBoost, "sync_boost"},
      {throttle::kSwThermalSlowdown, "sw_thermal_slowdown"},
      {throttle::kHwThermalSlowdown, "hw_thermal_slowdown"},
      {throttle::kHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
      {throttle::kDisplayClockSetting, "display_clock_setting"},
  };
  std::vector<std::string> names;
  for (const auto& [bit, name] : kNames) {
    if (bits & bit) names.emplace_back(name);
  }
  return names;
}

GpuClocks judge_clocks(const ClockReading& before, const ClockReading& after) {
  GpuClocks clocks;
  clocks.available = true;
  clocks.before = before;
  clocks.after = after;
  const uint64_t seen = before.throttle_reasons | after.throttle_reasons;
  clocks.reasons = throttle_reason_names(seen);
  std::vector<std::string> why;
  if (const uint64_t slowing = seen & throttle::kSlowing) {
    std::string names;
    for (const auto& name : throttle_reason_names(slowing)) names += (names.empty() ? "" : ", ") + name;
    why.push_back(fmt::format("throttle reasons {}", names));
  }
  const unsigned reference = after.sm_application_mhz > 0 ? after.sm_application_mhz : after.sm_max_mhz;
  const bool idle = (after.throttle_reasons & throttle::kGpuIdle) != 0;
  if (!idle && reference > 0 && after.sm_mhz < kLowClockFraction * reference) {
    why.push_back(fmt::format("SM clock {} MHz, below {:.0f}% of the {} clock {} MHz", after.sm_mhz,
                              kLowClockFraction * 100, after.sm_application_mhz > 0 ? "application" : "maximum",
                              reference));
  }
  clocks.throttled = !why.empty();
  if (clocks.throttled) {
    std::string text;
    for (const auto& part : why) text += (text.empty() ? "" : "; ") + part;
    clocks.warning = fmt::format("the GPU was throttled while timing ({}; {} C, {:.0f} W): times may be slow",
                                 text, after.temperature_c, after.power_w);
  }
  return clocks;
}

GpuClocks unavailable_clocks(std::string why) {
  GpuClocks clocks;
  clocks.available = false;
  clocks.unavailable = std::move(why);
  return clocks;
}

// The few NVML entry points d2k reads, declared here so that no NVML header is needed to build.
struct ClockSensor::Nvml {
  using Device = void*;
  using Status = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
  static constexpr int kClockSm = 1, kClockMem = 2, kTemperatureGpu = 0;

  void* library = nullptr;
  bool initialized = false;
  Device device = nullptr;
  Status (*init)() = nullptr;
  Status (*shutdown)() = nullptr;
  const char* (*error_string)(Status) = nullptr;
  Status (*handle_by_pci_bus_id)(const char*, Device*) = nullptr;
  Status (*clock_info)(Device, int, unsigned*) = nullptr;
  Status (*max_clock_info)(Device, int, unsigned*) = nullptr;
  Status (*applications_clock)(Device, int, unsigned*) = nullptr;
  Status (*temperature)(Device, int, unsigned*) = nullptr;
  Status (*power_usage)(Device, unsigned*) = nullptr;
  Status (*reasons)(Device, unsigned long long*) = nullptr;

  template <typename F>
  bool bind(F& slot, const char* name) {
    slot = reinterpret_cast<F>(::dlsym(library, name));
    return slot != nullptr;
  }
  std::string error(Status status) const {
    return error_string ? error_string(status) : fmt::format("NVML error {}", status);
  }
};

ClockSensor::ClockSensor() : nvml_(std::make_unique<Nvml>()) {
#ifdef D2K_WITH_CUDA
  Nvml& n = *nvml_;
  n.library = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (n.library == nullptr) {
    const char* why = ::dlerror();
    unavailable_ = fmt::format("NVML not loaded: {}", why ? why : "libnvidia-ml.so.1 not found");
    return;
  }
  n.bind(n.error_string, "nvmlErrorString");
  // Newer drivers name the reasons "clocks event reasons"; older ones only "clocks throttle reasons".
  if (!n.bind(n.reasons, "nvmlDeviceGetCurrentClocksEventReasons"))
    n.bind(n.reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  n.bind(n.applications_clock, "nvmlDeviceGetApplicationsClock");
  if (!n.bind(n.init, "nvmlInit_v2") || !n.bind(n.shutdown, "nvmlShutdown") ||
      !n.bind(n.handle_by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2") ||
      !n.bind(n.clock_info, "nvmlDeviceGetClockInfo") || !n.bind(n.max_clock_info, "nvmlDeviceGetMaxClockInfo") ||
      !n.bind(n.temperature, "nvmlDeviceGetTemperature") || !n.bind(n.power_usage, "nvmlDeviceGetPowerUsage") ||
      n.reasons == nullptr) {
    unavailable_ = "NVML lacks an entry point d2k reads";
    return;
  }
  if (Nvml::Status status = n.init(); status != 0) {
    unavailable_ = fmt::format("nvmlInit failed: {}", n.error(status));
    return;
  }
  n.initialized = true;
  // The PCI bus id names the same GPU to CUDA and NVML, whatever CUDA_VISIBLE_DEVICES says.
  int gpu = 0;
  char bus_id[32] = {};
  if (cudaGetDevice(&gpu) != cudaSuccess || cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, gpu) != cudaSuccess) {
    unavailable_ = "the CUDA device's PCI bus id could not be read";
    return;
  }
  if (Nvml::Status status = n.handle_by_pci_bus_id(bus_id, &n.device); status != 0) {
    unavailable_ = fmt::format("NVML does not know the GPU at {}: {}", bus_id, n.error(status));
  }
#else
  unavailable_ = "d2k was built without CUDA";
#endif
}

ClockSensor::~ClockSensor() {
  if (nvml_->initialized) nvml_->shutdown();
  if (nvml_->library) ::dlclose(nvml_->library);
}

std::optional<ClockReading> ClockSensor::read() const {
  if (!available()) return std::nullopt;
  const Nvml& n = *nvml_;
  ClockReading r;
  unsigned milliwatts = 0;
  unsigned long long reasons = 0;
  // A value the GPU does not report stays 0; only the SM clock is required.
  if (n.clock_info(n.device, Nvml::kClockSm, &r.sm_mhz) != 0) return std::nullopt;
  n.max_clock_info(n.device, Nvml::kClockSm, &r.sm_max_mhz);
  if (n.applications_clock) n.applications_clock(n.device, Nvml::kClockSm, &r.sm_application_mhz);
  n.clock_info(n.device, Nvml::kClockMem, &r.memory_mhz);
  n.temperature(n.device, Nvml::kTemperatureGpu, &r.temperature_c);
  if (n.power_usage(n.device, &milliwatts) == 0) r.power_w = milliwatts / 1000.0;
  if (n.reasons(n.device, &reasons) == 0) r.throttle_reasons = reasons;
  return r;
}

}  // namespace d2k
