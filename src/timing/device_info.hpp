// What the device is, for traces and for keying measured ceilings to the machine they came from.
#pragma once

#include <string>

#include "core/device.hpp"

namespace d2k {

// cuda: the GPU's name ("NVIDIA H200"); cpu: the CPU's model name from /proc/cpuinfo.
std::string device_name(Device device);
// Stable for one machine: cuda: the GPU's UUID ("GPU-8c1f..."); cpu: "<model name>@<hostname>".
std::string device_id(Device device);

}  // namespace d2k
