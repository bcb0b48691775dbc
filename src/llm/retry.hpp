// When to try a request again and how long to wait first: the rules client.cpp applies after each
// HTTP attempt, apart so tests can check them directly.
#pragma once

#include <optional>
#include <random>

#include "llm/chat.hpp"
#include "llm/http.hpp"
#include "llm/model_config.hpp"
#include "llm/wire.hpp"

namespace d2k::llm {

// The kind of failure an HTTP status and its error body mean (not called for 2xx).
ChatError::Kind classify(int status, const ProviderError& error);

// rate_limited, server and network are worth another attempt; the others would fail the same way again.
bool retryable(ChatError::Kind kind);

// The wait a response asks for: retry-after-ms (OpenAI), else Retry-After as delta-seconds or an HTTP
// date (compared with unix_now). None when absent or unreadable; never negative.
std::optional<double> retry_after(const HttpResponse& response, double unix_now);

// Exponential backoff with full jitter before retry number `retry` (1 for the first): uniform in
// [0, min(max_delay_s, base_delay_s * 2^(retry-1))].
double backoff(const RetryPolicy& policy, int retry, std::mt19937_64& rng);

}  // namespace d2k::llm
