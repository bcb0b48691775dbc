// The two wire formats: a provider-neutral ChatRequest to a request body, a response body back to a
// ChatResponse. Pure functions of JSON, so the retrying client (client.cpp) is the same for both.
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm/chat.hpp"
#include "llm/model_config.hpp"

namespace d2k::llm {

// A 2xx body that is not the shape the provider documents.
class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The sizes of one exchange, from which missing token counts are estimated.
struct ExchangeBytes {
  std::size_t request = 0;
  std::size_t reply = 0;
};

nlohmann::json openai_request(const ModelConfig& config, const ChatRequest& request);
ChatResponse openai_response(const nlohmann::json& body, const ExchangeBytes& bytes);

nlohmann::json anthropic_request(const ModelConfig& config, const ChatRequest& request);
ChatResponse anthropic_response(const nlohmann::json& body, const ExchangeBytes& bytes);

// A usage count of the reply: none when absent or null. A value that is not a whole number in
// [0, kMaxTokens] throws WireError naming the field (`path`) and the value.
std::optional<int64_t> token_count(const nlohmann::json& usage, const char* key, const std::string& path);

// Tool-call ids pair each call with its result in the next request: an empty one, or one already used in
// the reply or the conversation, would make the endpoint refuse that request or pair a result with the
// wrong call. Each such id becomes d2k_call_<n> (n: the call's place in the conversation, from 1; a
// suffix where even that is taken), the endpoint's kept in original_id.
void make_tool_call_ids_unique(std::vector<ToolCall>& calls, const std::vector<Message>& conversation);

// Tokens for `bytes` at kBytesPerToken, rounded up.
int64_t estimated_tokens(std::size_t bytes);

// What an error body says, for both providers: {"error": {"type", "code", "message"}} (OpenAI) and
// {"type": "error", "error": {"type", "message"}} (Anthropic). Fields missing from the body stay empty.
struct ProviderError {
  std::string type;
  std::string code;
  std::string message;
};
ProviderError provider_error(const std::string& body);

}  // namespace d2k::llm
