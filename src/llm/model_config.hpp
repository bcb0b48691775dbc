// Models come from a config file (TOML), one [models.<name>] table each. See docs/agent.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "llm/chat.hpp"
#include "llm/clock.hpp"

namespace d2k::llm {

enum class Provider { openai, anthropic };  // openai: any OpenAI-compatible chat-completions endpoint

struct Prices {  // US dollars per million tokens
  double input = 0;
  double cached_input = 0;
  double output = 0;
  double cache_write = 0;  // tokens written to the prompt cache (Anthropic: 1.25 x input); the config's default: input
};

struct RetryPolicy {
  int max_attempts = 6;         // HTTP attempts per request, the first included
  double base_delay_s = 1.0;    // before retry k: uniform in [0, min(max_delay_s, base_delay_s * 2^(k-1))]
  double max_delay_s = 60.0;    // caps every wait, a server's Retry-After included
};

struct ModelConfig {
  std::string name;          // the table's key: what --model names
  Provider provider = Provider::openai;
  std::string base_url;      // e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1
  std::string model;         // the provider's model id
  std::string api_key_env;   // name of the environment variable holding the key ("" for none)
  int max_tokens = 8192;     // output tokens per response
  std::optional<double> temperature;
  std::optional<double> top_p;
  Prices prices;
  double requests_per_minute = 0;  // per-provider rate limit shared by this process's clients; 0: none
  double timeout_s = 600;          // per HTTP attempt
  // The largest reply body read (decompressed), error bodies included; a larger 2xx reply is a format
  // error. 8 MiB is 16x a 128k-token answer in JSON: a reply that large is broken or hostile.
  std::size_t max_reply_bytes = 8u << 20;
  RetryPolicy retry;
  // Anthropic: mark the system prompt and the conversation's last block as cache breakpoints, so each turn
  // reads the previous turns from the prompt cache. OpenAI-compatible endpoints cache on their own.
  bool prompt_cache = true;
  // OpenAI: the request key for max_tokens. OpenAI's reasoning models (o-series, gpt-5) take only
  // "max_completion_tokens"; other compatible servers may know only "max_tokens".
  std::string max_tokens_field = "max_tokens";
  // Merged into every request body last (a JSON object): provider options this file has no key for,
  // such as {"reasoning_effort": "high"}.
  nlohmann::json extra_body = nlohmann::json::object();
};

// Every model of a config file. A malformed file throws d2k::Error naming the file, the field
// (models.<name>.<key>) and the value.
std::map<std::string, ModelConfig> load_models(const std::filesystem::path& file);

double cost_usd(const Usage& usage, const Prices& prices);

// The key is read from the environment variable api_key_env here; a missing or empty one throws
// ChatError(auth). Clients of one base_url share a rate limiter (requests_per_minute).
std::unique_ptr<ChatClient> make_client(const ModelConfig& config);

// A failed attempt about to be retried, for progress on a console: which attempt, why, how long the
// client waits before the next.
struct RetryNotice {
  int attempt = 1;        // the attempt that failed, from 1
  int max_attempts = 1;
  std::string why;        // "HTTP 429 rate_limited: <the provider's message>" or the network error
  double wait_seconds = 0;
};

struct ClientOptions {
  std::shared_ptr<Clock> clock;   // every wait (backoff, Retry-After, rate limit) goes through it; null: the system clock
  std::optional<uint64_t> seed;   // of the backoff jitter; none: a random one
  std::function<void(const RetryNotice&)> on_retry;  // called before each retry's wait; may be empty
};
std::unique_ptr<ChatClient> make_client(const ModelConfig& config, const ClientOptions& options);

const char* to_string(Provider provider);  // "openai" | "anthropic"

}  // namespace d2k::llm
