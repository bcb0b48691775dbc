#include "core/timestamp.hpp"

#include <chrono>
#include <ctime>

#include <fmt/format.h>

namespace d2k {

std::string utc_timestamp(bool milliseconds) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &tm);
  if (!milliseconds) return std::string(buffer) + "Z";
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  return fmt::format("{}.{:03d}Z", buffer, static_cast<int>(ms));
}

}  // namespace d2k
