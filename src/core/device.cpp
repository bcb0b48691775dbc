#include "core/device.hpp"

namespace d2k {

std::string_view name_of(Device device) { return device == Device::cuda ? "cuda" : "cpu"; }

std::optional<Device> parse_device(std::string_view name) {
  if (name == "cuda") return Device::cuda;
  if (name == "cpu") return Device::cpu;
  return std::nullopt;
}

}  // namespace d2k
