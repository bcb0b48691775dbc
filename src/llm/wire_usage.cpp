// The usage rules both wire formats share: a token count is trusted only when it is a plausible whole
// number, and a count the reply left out is estimated, never taken as 0.
#include <cmath>

#include <fmt/format.h>

#include "llm/wire.hpp"

namespace d2k::llm {

std::optional<int64_t> token_count(const nlohmann::json& usage, const char* key, const std::string& path) {
  if (!usage.is_object()) return std::nullopt;
  auto it = usage.find(key);
  if (it == usage.end() || it->is_null()) return std::nullopt;
  // A whole number sent as 12.0 is accepted: some servers write every number as a float.
  bool whole = it->is_number_integer() || (it->is_number_float() && std::isfinite(it->get<double>()) &&
                                           std::floor(it->get<double>()) == it->get<double>());
  double value = it->is_number() ? it->get<double>() : 0;
  if (!whole || value < 0 || value > static_cast<double>(kMaxTokens)) {
    throw WireError(fmt::format("{}.{} = {}: not a token count (a whole number from 0 to {})", path, key, it->dump(),
                                kMaxTokens));
  }
  return it->is_number_unsigned() ? static_cast<int64_t>(it->get<uint64_t>())
                                  : (it->is_number_integer() ? it->get<int64_t>() : static_cast<int64_t>(value));
}

int64_t estimated_tokens(std::size_t bytes) {
  return static_cast<int64_t>((bytes + kBytesPerToken - 1) / kBytesPerToken);
}

}  // namespace d2k::llm
