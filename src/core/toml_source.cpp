#include "core/toml_source.hpp"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "core/error.hpp"

namespace d2k {

std::string show(const toml::node& node) {
  if (auto text = node.value_exact<std::string>()) {
    std::string out = "\"";
    for (char c : *text) {
      if (c == '"' || c == '\\') out += '\\';
      out += c == '\n' ? std::string("\\n") : std::string(1, c);
    }
    return out + "\"";
  }
  if (auto integer = node.value_exact<int64_t>()) return std::to_string(*integer);
  if (auto real = node.value_exact<double>()) {
    std::string out = fmt::format("{}", *real);
    bool plain = out.find_first_of(".eEn") == std::string::npos;  // nan, inf contain an n
    return plain ? out + ".0" : out;
  }
  if (auto flag = node.value_exact<bool>()) return *flag ? "true" : "false";
  std::string out;
  if (const toml::array* array = node.as_array()) {
    for (const toml::node& element : *array) out += (out.empty() ? "" : ", ") + show(element);
    return "[" + out + "]";
  }
  if (const toml::table* table = node.as_table()) {
    for (auto&& [key, value] : *table) out += (out.empty() ? "" : ", ") + std::string(key.str()) + " = " + show(value);
    return "{ " + out + " }";
  }
  std::ostringstream other;  // dates and times
  other << toml::node_view<const toml::node>(&node);
  return other.str();
}

void TomlSource::error(const toml::node* at, const std::string& field, const std::string& message) const {
  fail("{}: {}", prefix(at, field), message);
}

void TomlSource::closed(const toml::table& table, const std::string& path,
                        std::initializer_list<std::string_view> allowed) const {
  for (auto&& [key, node] : table) {
    if (std::find(allowed.begin(), allowed.end(), key.str()) != allowed.end()) continue;
    std::string known;
    for (auto name : allowed) known += (known.empty() ? "" : ", ") + std::string(name);
    error(&node, path.empty() ? std::string(key.str()) : path + "." + std::string(key.str()),
          fmt::format("unknown key (known keys: {})", known));
  }
}

void TomlSource::bad(const toml::node& at, const std::string& field, const std::string& message) const {
  fail("{} = {}: {}", prefix(&at, field), show(at), message);
}

std::string TomlSource::prefix(const toml::node* at, const std::string& field) const {
  std::string out = file_;
  if (at != nullptr && at->source().begin.line > 0) out += fmt::format(":{}", at->source().begin.line);
  if (!field.empty()) out += ": " + field;
  return out;
}

}  // namespace d2k
