// The one interface between the agent runner (src/agent) and language models (src/llm): a provider-
// neutral conversation, a request, a response with its usage, and the failures a caller must tell apart.
// The OpenAI-compatible and Anthropic clients translate to and from their wire formats; nothing above
// this header knows which provider it talks to.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace d2k::llm {

struct ToolCall {
  std::string id;         // the provider's id, unique in the conversation; a tool result names it back
  std::string name;
  std::string arguments;  // JSON text exactly as the model sent it: it may be invalid
  // The id as the endpoint sent it, when it was empty or not unique and the client replaced it with one
  // of its own (d2k_call_<n>); none when the endpoint's id is kept.
  std::optional<std::string> original_id;
};

enum class Role { user, assistant, tool };

// Reasoning that came with an assistant turn, kept to be sent back: Anthropic requires the thinking
// blocks of a tool-use turn passed back unchanged (signature included) while the tool loop runs, and
// OpenAI-compatible reasoning servers (DeepSeek) the reasoning_content of a tool-call turn.
struct Reasoning {
  // The wire's own name: "thinking" or "redacted_thinking" (Anthropic blocks), "reasoning_content" or
  // "reasoning" (OpenAI-compatible message fields). Each client sends back only its own types.
  std::string type;
  std::string text;       // the reasoning; empty for redacted_thinking
  std::string signature;  // thinking: the signature Anthropic checks when the block comes back
  std::string data;       // redacted_thinking: the encrypted reasoning
  int after_calls = 0;    // tool calls of the turn before it (interleaved thinking goes back in its place)
};

struct Message {
  Role role = Role::user;
  std::string text;                 // user text, assistant text, or a tool result's content
  std::vector<ToolCall> tool_calls; // assistant only
  std::string tool_call_id;         // tool only: the call this result answers
  bool is_error = false;            // tool only: the tool failed (unknown tool, bad arguments, ...)
  std::vector<Reasoning> reasoning; // assistant only, in the order it came
};

struct ToolSpec {
  std::string name;
  std::string description;
  nlohmann::json parameters;  // JSON schema of the arguments object
};

struct ChatRequest {
  std::string system;
  std::vector<Message> messages;
  std::vector<ToolSpec> tools;
};

struct Usage {
  int64_t input_tokens = 0;         // all prompt tokens, cached ones included
  int64_t cached_input_tokens = 0;  // the part of input_tokens read from the provider's cache
  int64_t cache_write_input_tokens = 0;  // the part of input_tokens written to the cache (Anthropic bills it apart)
  int64_t output_tokens = 0;
  // The reply lacked input_tokens or output_tokens (or was unreadable), and the missing ones were
  // estimated from bytes (kBytesPerToken), so that a reply without usage still counts toward a budget.
  bool estimated = false;
  nlohmann::json raw;               // the provider's usage object, as it came
};

// The rate of the estimate above: BPE tokenizers average about 4 bytes a token on English and code. A
// request's bytes include JSON syntax and schemas, so the estimate errs high, toward tripping a budget.
constexpr int64_t kBytesPerToken = 4;

// No one response has more tokens than this (10x the largest context window): a count above it, or
// below 0, is the endpoint's format error, never added to a run's usage.
constexpr int64_t kMaxTokens = 100'000'000;

struct ChatResponse {
  Message message;             // role assistant
  std::string stop_reason;     // normalized: end_turn | tool_use | max_tokens | other:<provider's>
  Usage usage;
  nlohmann::json raw;          // the provider's response body, as it came
  int attempts = 1;            // HTTP attempts it took (retries included)
  double seconds = 0;          // wall time, retries and waits included
  // Why a 2xx reply could not be used: not JSON, invalid UTF-8 or UTF-16, not the provider's shape,
  // over the size cap (max_reply_bytes), a token count that is negative or absurd. Empty when it could.
  // The endpoint answered and may have billed it, so it is a response, not a ChatError: its message is
  // empty, raw holds the reply's first 4 KiB as a string, and its usage is estimated. The caller decides
  // what it costs (the agent loop counts a format error and asks again).
  std::string format_error;
};

// Why a request failed for good (after the retries the kind allows). The agent loop maps each kind to
// a run's exit status: context_length -> context overflow, the others -> api error.
class ChatError : public std::runtime_error {
 public:
  enum class Kind { auth, spend_limit, context_length, rate_limited, server, bad_request, bad_response, network };
  ChatError(Kind kind, int http_status, const std::string& message)
      : std::runtime_error(message), kind_(kind), http_status_(http_status) {}
  ChatError(Kind kind, int http_status, const std::string& message, int attempts, std::string body)
      : std::runtime_error(message), kind_(kind), http_status_(http_status), attempts_(attempts), body_(std::move(body)) {}
  Kind kind() const { return kind_; }
  int http_status() const { return http_status_; }  // 0 when no HTTP response came
  int attempts() const { return attempts_; }         // HTTP attempts made, 0 when none was
  const std::string& body() const { return body_; }  // the last response's body as it came, for the transcript

 private:
  Kind kind_;
  int http_status_;
  int attempts_ = 0;
  std::string body_;
};

// "auth", "spend_limit", ...: the kind as transcripts and messages spell it.
const char* to_string(ChatError::Kind kind);

class ChatClient {
 public:
  virtual ~ChatClient() = default;
  // One model response. Retries (429, 5xx, 529, network) happen inside, with backoff; throws ChatError.
  // A 2xx reply that cannot be used is returned with format_error set: check it.
  virtual ChatResponse complete(const ChatRequest& request) = 0;
};

}  // namespace d2k::llm
