// models.toml: every key is checked (unknown ones rejected) and every error names file:line, the field
// path (models.<name>.<key>) and the value as written, the way core/task_loader.cpp reports task.toml.
#include "llm/model_config.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>


#include <fmt/format.h>

#include "core/error.hpp"
#include "core/toml_source.hpp"
#include "llm/redact.hpp"

namespace d2k::llm {
namespace {

namespace fs = std::filesystem;

class Reader : public TomlSource {
 public:
  using TomlSource::TomlSource;

  std::string string(const toml::node& node, const std::string& field) const {
    auto value = node.value_exact<std::string>();
    if (!value) bad(node, field, "must be a string");
    return *value;
  }
  double number(const toml::node& node, const std::string& field) const {
    if (!node.is_number()) bad(node, field, "must be a number");
    double value = *node.value<double>();
    if (!std::isfinite(value)) bad(node, field, "must be finite");
    return value;
  }
  int64_t integer(const toml::node& node, const std::string& field) const {
    auto value = node.value_exact<int64_t>();
    if (!value) bad(node, field, "must be an integer");
    return *value;
  }
  const toml::table& table(const toml::node& node, const std::string& field) const {
    if (!node.is_table()) bad(node, field, "must be a table");
    return *node.as_table();
  }
};

// extra_body's TOML as the JSON that goes into the request (dates and times have no JSON form).
nlohmann::json to_json(const Reader& reader, const toml::node& node, const std::string& path) {
  if (const toml::table* table = node.as_table()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto&& [key, value] : *table) out[std::string(key.str())] = to_json(reader, value, path + "." + std::string(key.str()));
    return out;
  }
  if (const toml::array* array = node.as_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (std::size_t i = 0; i < array->size(); ++i) out.push_back(to_json(reader, (*array)[i], fmt::format("{}[{}]", path, i)));
    return out;
  }
  if (auto text = node.value_exact<std::string>()) return *text;
  if (auto integer = node.value_exact<int64_t>()) return *integer;
  if (auto real = node.value_exact<double>()) return *real;
  if (auto flag = node.value_exact<bool>()) return *flag;
  reader.bad(node, path, "has no JSON form (dates and times are not allowed here)");
}

bool is_model_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-' || c == '.';
  });
}

bool is_env_name(std::string_view name) {
  return !name.empty() && !std::isdigit(static_cast<unsigned char>(name.front())) &&
         std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

ModelConfig read_model(const Reader& reader, const std::string& name, const toml::table& table, const std::string& path) {
  reader.closed(table, path,
                {"provider", "base_url", "model", "api_key_env", "max_tokens", "temperature", "top_p", "prices",
                 "requests_per_minute", "timeout_s", "retry", "prompt_cache", "max_tokens_field", "extra_body",
                 "max_reply_bytes"});
  auto field = [&](std::string_view key) { return path + "." + std::string(key); };
  auto need = [&](std::string_view key) -> const toml::node& {
    const toml::node* node = table.get(key);
    if (node == nullptr) reader.error(&table, path, fmt::format("missing required key '{}'", key));
    return *node;
  };
  // A number that must lie in [low, high] (bounds optional); low_open makes it (low, high].
  auto ranged = [&](const toml::node& node, const std::string& at, std::optional<double> low, std::optional<double> high,
                    bool low_open, const char* rule) {
    double value = reader.number(node, at);
    if ((low && (low_open ? value <= *low : value < *low)) || (high && value > *high)) reader.bad(node, at, rule);
    return value;
  };

  ModelConfig config;
  config.name = name;

  const toml::node& provider = need("provider");
  std::string kind = reader.string(provider, field("provider"));
  if (kind == "openai") {
    config.provider = Provider::openai;
  } else if (kind == "anthropic") {
    config.provider = Provider::anthropic;
  } else {
    reader.bad(provider, field("provider"), "unknown provider (known: openai, anthropic)");
  }

  const toml::node& base_url = need("base_url");
  config.base_url = reader.string(base_url, field("base_url"));
  if (!config.base_url.starts_with("http://") && !config.base_url.starts_with("https://")) {
    reader.bad(base_url, field("base_url"), "must start with http:// or https://");
  }
  while (config.base_url.ends_with('/')) config.base_url.pop_back();

  const toml::node& model = need("model");
  config.model = reader.string(model, field("model"));
  if (config.model.empty()) reader.bad(model, field("model"), "must not be empty");

  if (const toml::node* node = table.get("api_key_env")) {
    config.api_key_env = reader.string(*node, field("api_key_env"));
    // Checked first, and the value never shown: an error message must not print the key it refuses.
    if (looks_like_key(config.api_key_env)) {
      reader.error(node, field("api_key_env"),
                   "looks like an API key, not the name of an environment variable (the value is not shown): put the "
                   "key in an environment variable and give that variable's name here");
    }
    if (!config.api_key_env.empty() && !is_env_name(config.api_key_env)) {
      reader.bad(*node, field("api_key_env"), "must be an environment variable's name (letters, digits, _), or \"\" for no key");
    }
  }
  if (const toml::node* node = table.get("max_tokens")) {
    int64_t value = reader.integer(*node, field("max_tokens"));
    if (value < 1 || value > 10'000'000) reader.bad(*node, field("max_tokens"), "must be between 1 and 10000000");
    config.max_tokens = static_cast<int>(value);
  }
  if (const toml::node* node = table.get("temperature")) {
    config.temperature = ranged(*node, field("temperature"), 0.0, 2.0, false, "must be between 0 and 2");
  }
  if (const toml::node* node = table.get("top_p")) {
    config.top_p = ranged(*node, field("top_p"), 0.0, 1.0, true, "must be in (0, 1]");
  }

  // Prices are required: a run whose cost silently reads 0 would defeat cost budgets.
  const toml::node& prices = need("prices");
  const toml::table& price_table = reader.table(prices, field("prices"));
  std::string price_path = field("prices");
  reader.closed(price_table, price_path, {"input", "cached_input", "output", "cache_write"});
  auto price = [&](std::string_view key, bool required, double fallback) {
    const toml::node* node = price_table.get(key);
    if (node == nullptr) {
      if (required) reader.error(&prices, price_path, fmt::format("missing required key '{}'", key));
      return fallback;
    }
    return ranged(*node, price_path + "." + std::string(key), 0.0, std::nullopt, false, "must be >= 0");
  };
  config.prices.input = price("input", true, 0);
  config.prices.output = price("output", true, 0);
  config.prices.cached_input = price("cached_input", false, config.prices.input);  // no cache discount unless given
  config.prices.cache_write = price("cache_write", false, config.prices.input);

  if (const toml::node* node = table.get("requests_per_minute")) {
    config.requests_per_minute = ranged(*node, field("requests_per_minute"), 0.0, std::nullopt, false, "must be >= 0 (0: no limit)");
  }
  if (const toml::node* node = table.get("timeout_s")) {
    config.timeout_s = ranged(*node, field("timeout_s"), 0.0, std::nullopt, true, "must be > 0");
  }
  if (const toml::node* node = table.get("max_reply_bytes")) {
    int64_t value = reader.integer(*node, field("max_reply_bytes"));
    if (value < 1024 || value > (int64_t{1} << 30)) reader.bad(*node, field("max_reply_bytes"), "must be between 1024 and 1073741824");
    config.max_reply_bytes = static_cast<std::size_t>(value);
  }
  if (const toml::node* node = table.get("prompt_cache")) {
    auto value = node->value_exact<bool>();
    if (!value) reader.bad(*node, field("prompt_cache"), "must be true or false");
    config.prompt_cache = *value;
  }
  if (const toml::node* node = table.get("max_tokens_field")) {
    config.max_tokens_field = reader.string(*node, field("max_tokens_field"));
    if (config.max_tokens_field != "max_tokens" && config.max_tokens_field != "max_completion_tokens") {
      reader.bad(*node, field("max_tokens_field"), "must be \"max_tokens\" or \"max_completion_tokens\"");
    }
    if (config.provider != Provider::openai && config.max_tokens_field != "max_tokens") {
      reader.bad(*node, field("max_tokens_field"), "the Anthropic API takes only max_tokens");
    }
  }
  if (const toml::node* node = table.get("extra_body")) {
    config.extra_body = to_json(reader, reader.table(*node, field("extra_body")), field("extra_body"));
  }
  if (const toml::node* node = table.get("retry")) {
    std::string retry_path = field("retry");
    const toml::table& retry = reader.table(*node, retry_path);
    reader.closed(retry, retry_path, {"max_attempts", "base_delay_s", "max_delay_s"});
    if (const toml::node* at = retry.get("max_attempts")) {
      int64_t value = reader.integer(*at, retry_path + ".max_attempts");
      if (value < 1 || value > 100) reader.bad(*at, retry_path + ".max_attempts", "must be between 1 and 100");
      config.retry.max_attempts = static_cast<int>(value);
    }
    if (const toml::node* at = retry.get("base_delay_s")) {
      config.retry.base_delay_s = ranged(*at, retry_path + ".base_delay_s", 0.0, std::nullopt, false, "must be >= 0");
    }
    if (const toml::node* at = retry.get("max_delay_s")) {
      config.retry.max_delay_s = ranged(*at, retry_path + ".max_delay_s", 0.0, std::nullopt, false, "must be >= 0");
      if (config.retry.max_delay_s < config.retry.base_delay_s) {
        reader.bad(*at, retry_path + ".max_delay_s", fmt::format("must be >= base_delay_s ({})", config.retry.base_delay_s));
      }
    }
  }
  return config;
}

}  // namespace

std::map<std::string, ModelConfig> load_models(const fs::path& file) {
  Reader reader(file);
  if (!fs::is_regular_file(file)) fail("{}: no such model config file", file.string());
  toml::table root;
  try {
    root = toml::parse_file(file.string());
  } catch (const toml::parse_error& error) {
    fail("{}:{}:{}: invalid TOML: {}", file.string(), error.source().begin.line, error.source().begin.column,
         error.description());
  }
  reader.closed(root, "", {"models"});
  const toml::node* models = root.get("models");
  if (models == nullptr) reader.error(nullptr, "models", "missing: the file defines no [models.<name>] table");
  const toml::table& tables = reader.table(*models, "models");
  if (tables.empty()) reader.error(models, "models", "defines no model");
  std::map<std::string, ModelConfig> out;
  for (auto&& [key, node] : tables) {
    std::string name(key.str());
    std::string path = "models." + name;
    if (!is_model_name(name)) reader.error(&node, path, "a model name is letters, digits, '_', '-' and '.'");
    out.emplace(name, read_model(reader, name, reader.table(node, path), path));
  }
  return out;
}

double cost_usd(const Usage& usage, const Prices& prices) {
  int64_t plain = std::max<int64_t>(0, usage.input_tokens - usage.cached_input_tokens - usage.cache_write_input_tokens);
  return (static_cast<double>(plain) * prices.input + static_cast<double>(usage.cached_input_tokens) * prices.cached_input +
          static_cast<double>(usage.cache_write_input_tokens) * prices.cache_write +
          static_cast<double>(usage.output_tokens) * prices.output) /
         1e6;
}

const char* to_string(Provider provider) { return provider == Provider::openai ? "openai" : "anthropic"; }

}  // namespace d2k::llm
