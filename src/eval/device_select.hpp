// Which device an evaluation runs on when the user did not say.
#pragma once

#include <optional>
#include <string>

#include "core/device.hpp"

namespace d2k {

// Empty when a CUDA GPU is usable; otherwise why not, for a person.
std::optional<std::string> cuda_unavailable();

}  // namespace d2k
