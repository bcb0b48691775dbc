#include "llm/redact.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace d2k::llm {
namespace {

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) text.replace(at, from.size(), to);
}

std::string percent_encoded(const std::string& key, bool upper) {
  std::string out;
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') out += static_cast<char>(c);
    else out += upper ? fmt::format("%{:02X}", c) : fmt::format("%{:02x}", c);
  }
  return out;
}

}  // namespace

std::string redact_key(std::string text, const std::string& key) {
  if (key.size() < 8) return text;
  std::string escaped = nlohmann::json(key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  escaped = escaped.substr(1, escaped.size() - 2);
  std::string slash_escaped = escaped;
  replace_all(slash_escaped, "/", "\\/");
  for (const std::string& form : {key, escaped, slash_escaped, percent_encoded(key, true), percent_encoded(key, false)}) {
    replace_all(text, form, "[redacted key]");
  }
  return text;
}

bool looks_like_key(const std::string& value) {
  static const char* prefixes[] = {"sk-", "sk_", "gsk_", "xai-", "hf_", "AIza", "nvapi-", "pplx-", "r8_"};
  for (const char* prefix : prefixes) {
    if (value.starts_with(prefix)) return true;
  }
  bool digit = std::any_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); });
  bool letter = std::any_of(value.begin(), value.end(), [](unsigned char c) { return std::isalpha(c); });
  return value.size() >= 20 && digit && letter && value.find('_') == std::string::npos;
}

}  // namespace d2k::llm
