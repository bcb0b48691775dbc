// Response bodies in each provider's wire format, for scripts: one assistant turn of text and tool
// calls. Tool-call arguments are JSON text; OpenAI's are sent as that string exactly (invalid JSON
// included), Anthropic's must parse to an object (its API sends only objects).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace d2k::scripted {

struct Call {
  std::string id;
  std::string name;
  std::string arguments;
};

struct Tokens {
  int64_t input = 100;   // every prompt token, cached ones included
  int64_t cached = 0;
  int64_t output = 20;
};

inline nlohmann::json openai_reply(const std::string& text, const std::vector<Call>& calls = {}, Tokens tokens = {},
                                   std::string finish_reason = "") {
  nlohmann::json message = {{"role", "assistant"}, {"content", text.empty() && !calls.empty() ? nlohmann::json() : nlohmann::json(text)}};
  if (!calls.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const Call& call : calls) {
      list.push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    }
    message["tool_calls"] = std::move(list);
  }
  if (finish_reason.empty()) finish_reason = calls.empty() ? "stop" : "tool_calls";
  return {{"id", "chatcmpl-scripted"},
          {"object", "chat.completion"},
          {"choices", nlohmann::json::array({{{"index", 0}, {"message", message}, {"finish_reason", finish_reason}}})},
          {"usage", {{"prompt_tokens", tokens.input}, {"completion_tokens", tokens.output},
                     {"total_tokens", tokens.input + tokens.output},
                     {"prompt_tokens_details", {{"cached_tokens", tokens.cached}}}}}};
}

inline nlohmann::json anthropic_reply(const std::string& text, const std::vector<Call>& calls = {}, Tokens tokens = {},
                                      std::string stop_reason = "") {
  nlohmann::json content = nlohmann::json::array();
  if (!text.empty()) content.push_back({{"type", "text"}, {"text", text}});
  for (const Call& call : calls) {
    content.push_back({{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", nlohmann::json::parse(call.arguments)}});
  }
  if (stop_reason.empty()) stop_reason = calls.empty() ? "end_turn" : "tool_use";
  return {{"id", "msg_scripted"},
          {"type", "message"},
          {"role", "assistant"},
          {"model", "scripted"},
          {"content", content},
          {"stop_reason", stop_reason},
          {"stop_sequence", nullptr},
          {"usage", {{"input_tokens", tokens.input - tokens.cached}, {"cache_read_input_tokens", tokens.cached},
                     {"cache_creation_input_tokens", 0}, {"output_tokens", tokens.output}}}};
}

}  // namespace d2k::scripted
