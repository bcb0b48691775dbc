// The retrying client shared by both providers: rate limit, POST, classify, wait, again. Only the body
// and the headers differ between providers (wire_*.cpp).
#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "llm/http.hpp"
#include "llm/model_config.hpp"
#include "llm/rate_limiter.hpp"
#include "llm/redact.hpp"
#include "llm/retry.hpp"
#include "llm/wire.hpp"

namespace d2k::llm {
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

bool has(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

bool is_number(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c) || c == '.'; }) &&
         std::count(text.begin(), text.end(), '.') <= 1 && text != ".";
}

class HttpChatClient : public ChatClient {
 public:
  HttpChatClient(ModelConfig config, std::string key, const ClientOptions& options)
      : config_(std::move(config)),
        key_(std::move(key)),
        clock_(options.clock ? options.clock : system_clock()),
        on_retry_(options.on_retry),
        rng_(options.seed ? *options.seed : std::random_device{}()),
        limiter_(rate_limiter_for(config_.base_url, config_.requests_per_minute)) {
    bool openai = config_.provider == Provider::openai;
    url_ = config_.base_url + (openai ? "/chat/completions" : "/messages");
    headers_ = {"Content-Type: application/json", "Accept: application/json"};
    if (openai) {
      if (!key_.empty()) headers_.push_back("Authorization: Bearer " + key_);
    } else {
      if (!key_.empty()) headers_.push_back("x-api-key: " + key_);
      headers_.push_back("anthropic-version: 2023-06-01");
    }
  }

  ChatResponse complete(const ChatRequest& request) override {
    std::lock_guard lock(mutex_);  // one handle, one request at a time
    bool openai = config_.provider == Provider::openai;
    // Tool output (a compiler's, a file's) may hold bytes that are not UTF-8, which JSON cannot carry:
    // they go as U+FFFD rather than failing the turn.
    std::string body = (openai ? openai_request(config_, request) : anthropic_request(config_, request))
                           .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    double start = clock_->now();
    int max_attempts = std::max(1, config_.retry.max_attempts);
    for (int attempt = 1;; ++attempt) {
      if (limiter_) limiter_->acquire(*clock_);
      HttpResponse response;
      try {
        response = http_.post(url_, headers_, body, config_.timeout_s, config_.max_reply_bytes);
        // Before anything reads it: whatever the body echoes of the key goes no further (redact.hpp).
        response.body = redact_key(std::move(response.body), key_);
      } catch (const HttpError& error) {
        if (attempt >= max_attempts) {
          throw ChatError(ChatError::Kind::network, 0,
                          redact_key(fmt::format("{}: {} ({} attempts)", config_.name, error.what(), attempt), key_), attempt, "");
        }
        retry(attempt, max_attempts, error.what(), backoff(config_.retry, attempt, rng_));
        continue;
      }
      if (response.status >= 200 && response.status < 300) {
        ChatResponse out = reply(response, body.size());
        make_tool_call_ids_unique(out.message.tool_calls, request.messages);
        out.attempts = attempt;
        out.seconds = clock_->now() - start;
        return out;
      }
      ProviderError error = provider_error(response.body);
      ChatError::Kind kind = classify(response.status, error);
      if (!retryable(kind) || attempt >= max_attempts) {
        std::string what = error.type.empty() ? error.code : error.type;
        throw ChatError(kind, response.status,
                        redact_key(fmt::format("{}: {}: HTTP {}{}{}: {} ({}; {} attempt{})", config_.name, url_,
                                               response.status, what.empty() ? "" : " ", what, error.message,
                                               to_string(kind), attempt, attempt == 1 ? "" : "s"),
                                   key_),
                        attempt, response.body);
      }
      auto asked = retry_after(response, clock_->unix_time());
      retry(attempt, max_attempts, fmt::format("HTTP {} {}: {}", response.status, to_string(kind), error.message),
            asked ? std::min(*asked, config_.retry.max_delay_s) : backoff(config_.retry, attempt, rng_));
    }
  }

 private:
  // A 2xx reply as a response; one that cannot be used is a response with format_error set (see chat.hpp).
  ChatResponse reply(const HttpResponse& response, std::size_t request_bytes) const {
    ExchangeBytes bytes{request_bytes, response.body.size()};
    std::string why;
    if (response.too_large) {
      why = fmt::format("the reply is larger than max_reply_bytes ({} bytes); the rest was not read", config_.max_reply_bytes);
    } else {
      try {
        nlohmann::json parsed = nlohmann::json::parse(response.body);
        return config_.provider == Provider::openai ? openai_response(parsed, bytes) : anthropic_response(parsed, bytes);
      } catch (const std::exception& error) {  // nlohmann's parse_error (invalid UTF-8 or UTF-16 included) and WireError
        why = error.what();
      }
    }
    ChatResponse out;
    out.message.role = Role::assistant;
    out.stop_reason = "other:format_error";
    out.format_error = fmt::format("{}: {}: HTTP {} with a reply that is not a {} response: {}", config_.name, url_,
                                   response.status, to_string(config_.provider), why);
    out.raw = response.body.substr(0, 4096);
    out.usage.input_tokens = estimated_tokens(bytes.request);
    out.usage.output_tokens = estimated_tokens(bytes.reply);
    out.usage.estimated = true;
    return out;
  }

  // Says so (on_retry), then waits before the next attempt.
  void retry(int attempt, int max_attempts, std::string why, double seconds) {
    if (on_retry_) on_retry_(RetryNotice{attempt, max_attempts, std::move(why), seconds});
    if (seconds > 0) clock_->sleep(seconds);
  }

  ModelConfig config_;
  std::string key_;
  std::shared_ptr<Clock> clock_;
  std::function<void(const RetryNotice&)> on_retry_;
  std::mt19937_64 rng_;
  std::shared_ptr<RateLimiter> limiter_;
  std::string url_;
  std::vector<std::string> headers_;
  std::mutex mutex_;
  Http http_;
};

}  // namespace

const char* to_string(ChatError::Kind kind) {
  switch (kind) {
    case ChatError::Kind::auth: return "auth";
    case ChatError::Kind::spend_limit: return "spend_limit";
    case ChatError::Kind::context_length: return "context_length";
    case ChatError::Kind::rate_limited: return "rate_limited";
    case ChatError::Kind::server: return "server";
    case ChatError::Kind::bad_request: return "bad_request";
    case ChatError::Kind::bad_response: return "bad_response";
    case ChatError::Kind::network: return "network";
  }
  return "unknown";
}

ChatError::Kind classify(int status, const ProviderError& error) {
  using Kind = ChatError::Kind;
  std::string type = lower(error.type), code = lower(error.code), message = lower(error.message);
  if (status == 401 || status == 403) return Kind::auth;
  if (status == 402 || has(type, "insufficient_quota") || has(code, "insufficient_quota") || has(type, "billing") ||
      has(code, "billing") || has(message, "exceeded your current quota") || has(message, "credit balance")) {
    return Kind::spend_limit;
  }
  if (status == 429) return Kind::rate_limited;
  if (status == 408 || status >= 500) return Kind::server;  // 529: Anthropic overloaded
  if (status == 413 || code == "context_length_exceeded" || has(message, "context length") ||
      has(message, "context_length") || has(message, "context window") || has(message, "prompt is too long") ||
      has(message, "maximum context") || has(message, "too many tokens")) {
    return Kind::context_length;
  }
  if (status >= 400) return Kind::bad_request;
  return Kind::bad_response;  // 1xx/3xx where a 2xx belongs
}

bool retryable(ChatError::Kind kind) {
  return kind == ChatError::Kind::rate_limited || kind == ChatError::Kind::server || kind == ChatError::Kind::network;
}

std::optional<double> retry_after(const HttpResponse& response, double unix_now) {
  if (auto ms = response.header("retry-after-ms"); ms && is_number(*ms)) return std::stod(*ms) / 1000.0;
  auto value = response.header("retry-after");
  if (!value) return std::nullopt;
  if (is_number(*value)) return std::stod(*value);
  time_t when = curl_getdate(value->c_str(), nullptr);
  if (when == -1) return std::nullopt;
  return std::max(0.0, static_cast<double>(when) - unix_now);
}

double backoff(const RetryPolicy& policy, int retry, std::mt19937_64& rng) {
  double cap = std::min(policy.max_delay_s, policy.base_delay_s * std::ldexp(1.0, std::min(retry - 1, 60)));
  if (cap <= 0) return 0;
  return std::uniform_real_distribution<double>(0, cap)(rng);
}

std::unique_ptr<ChatClient> make_client(const ModelConfig& config) { return make_client(config, ClientOptions{}); }

std::unique_ptr<ChatClient> make_client(const ModelConfig& config, const ClientOptions& options) {
  std::string key;
  if (!config.api_key_env.empty()) {
    const char* value = std::getenv(config.api_key_env.c_str());
    if (value == nullptr || *value == '\0') {
      throw ChatError(ChatError::Kind::auth, 0,
                      fmt::format("model {}: the environment variable {} (api_key_env) is not set", config.name,
                                  config.api_key_env));
    }
    key = value;
  }
  return std::make_unique<HttpChatClient>(config, std::move(key), options);
}

}  // namespace d2k::llm
