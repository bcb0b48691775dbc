// The two evaluation devices: cuda (the real one) and cpu (a test seam so the whole pipeline runs in CI).
#pragma once

#include <optional>
#include <string_view>

namespace d2k {

enum class Device { cuda, cpu };

std::string_view name_of(Device device);
std::optional<Device> parse_device(std::string_view name);

}  // namespace d2k
