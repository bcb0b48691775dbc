// The Anthropic Messages API (POST {base_url}/messages). The neutral conversation's tool messages become
// tool_result blocks of a user message: consecutive user and tool messages merge into one user message,
// tool results first (the API wants every tool_use answered at the start of the next user turn).
#include <algorithm>
#include <string>

#include "llm/wire.hpp"

namespace d2k::llm {
namespace {

using nlohmann::json;

// Anthropic wants the input of a tool_use as an object. Arguments that are not one (only possible in a
// conversation written by hand or carried over from another provider) are sent as text so nothing is lost.
json tool_input(const std::string& arguments) {
  json parsed = json::parse(arguments, nullptr, false);
  if (!parsed.is_discarded() && parsed.is_object()) return parsed;
  return {{"_invalid_arguments", arguments}};
}

// The thinking blocks that came after `after_calls` tool calls, as they came.
void add_thinking(json& content, const std::vector<Reasoning>& reasoning, int after_calls) {
  for (const Reasoning& r : reasoning) {
    if (r.after_calls != after_calls) continue;
    if (r.type == "thinking") {
      content.push_back({{"type", "thinking"}, {"thinking", r.text}, {"signature", r.signature}});
    } else if (r.type == "redacted_thinking") {
      content.push_back({{"type", "redacted_thinking"}, {"data", r.data}});
    }
  }
}

// A thinking or redacted_thinking block of a reply.
Reasoning thinking(const json& block, const std::string& type, int after_calls) {
  auto text = [&](const char* key) {
    if (!block.contains(key) || !block[key].is_string()) throw WireError("a " + type + " block without " + key + ": " + block.dump());
    return block[key].get<std::string>();
  };
  Reasoning out;
  out.type = type;
  out.after_calls = after_calls;
  if (type == "thinking") {
    out.text = text("thinking");
    out.signature = text("signature");
  } else {
    out.data = text("data");
  }
  return out;
}

std::string stop_reason(const json& reason) {
  if (!reason.is_string()) return "other:" + reason.dump();
  std::string value = reason.get<std::string>();
  if (value == "end_turn" || value == "stop_sequence") return "end_turn";
  if (value == "tool_use" || value == "max_tokens") return value;
  return "other:" + value;
}

// Anthropic's input_tokens counts only the part neither read from nor written to the cache;
// Usage.input_tokens counts every prompt token. A missing input_tokens or output_tokens is estimated.
Usage usage_of(const json& body, const ExchangeBytes& bytes) {
  Usage usage;
  auto it = body.find("usage");
  if (it != body.end() && !it->is_null() && !it->is_object()) throw WireError("usage = " + it->dump() + ": not an object");
  if (it != body.end() && it->is_object()) usage.raw = *it;
  const json& raw = usage.raw;
  auto input = token_count(raw, "input_tokens", "usage");
  auto output = token_count(raw, "output_tokens", "usage");
  int64_t reads = token_count(raw, "cache_read_input_tokens", "usage").value_or(0);
  int64_t writes = token_count(raw, "cache_creation_input_tokens", "usage").value_or(0);
  usage.input_tokens = input ? *input + reads + writes : std::max(estimated_tokens(bytes.request), reads + writes);
  usage.cached_input_tokens = reads;
  usage.cache_write_input_tokens = writes;
  usage.output_tokens = output.value_or(estimated_tokens(bytes.reply));
  usage.estimated = !input || !output;
  return usage;
}

}  // namespace

json anthropic_request(const ModelConfig& config, const ChatRequest& request) {
  json messages = json::array();
  for (const Message& message : request.messages) {
    // An empty assistant turn (the model said nothing) has no block to send, and the API refuses empty
    // content: it is left out, and the user turns around it become one.
    if (message.role == Role::assistant && message.text.empty() && message.tool_calls.empty()) continue;
    bool user_side = message.role != Role::assistant;
    const char* role = user_side ? "user" : "assistant";
    if (messages.empty() || messages.back()["role"] != role) {
      messages.push_back({{"role", role}, {"content", json::array()}});
    }
    json& content = messages.back()["content"];
    if (message.role == Role::tool) {
      json block = {{"type", "tool_result"}, {"tool_use_id", message.tool_call_id}, {"content", message.text}};
      if (message.is_error) block["is_error"] = true;
      // tool_result blocks go before any text of the same user turn.
      auto first_text = content.begin();
      while (first_text != content.end() && (*first_text)["type"] == "tool_result") ++first_text;
      content.insert(first_text, std::move(block));
      continue;
    }
    add_thinking(content, message.reasoning, 0);
    // The API refuses empty text blocks.
    if (!message.text.empty()) content.push_back({{"type", "text"}, {"text", message.text}});
    for (std::size_t i = 0; i < message.tool_calls.size(); ++i) {
      const ToolCall& call = message.tool_calls[i];
      content.push_back({{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", tool_input(call.arguments)}});
      add_thinking(content, message.reasoning, static_cast<int>(i) + 1);
    }
  }
  json cache = {{"type", "ephemeral"}};
  // One breakpoint at the end of the conversation caches all of it (tools and system included) for the
  // next turn, which appends to it.
  if (config.prompt_cache && !messages.empty() && !messages.back()["content"].empty()) {
    messages.back()["content"].back()["cache_control"] = cache;
  }
  json body = {{"model", config.model}, {"max_tokens", config.max_tokens}, {"messages", std::move(messages)}};
  if (!request.system.empty()) {
    // A second breakpoint after the system prompt: the cache lookup from the last block reaches back only
    // 20 blocks, which one turn of many tool calls can exceed; tools and system stay cached regardless.
    if (config.prompt_cache) {
      body["system"] = json::array({{{"type", "text"}, {"text", request.system}, {"cache_control", cache}}});
    } else {
      body["system"] = request.system;
    }
  }
  if (config.temperature) body["temperature"] = *config.temperature;
  if (config.top_p) body["top_p"] = *config.top_p;
  if (!request.tools.empty()) {
    json tools = json::array();
    for (const ToolSpec& tool : request.tools) {
      tools.push_back({{"name", tool.name}, {"description", tool.description}, {"input_schema", tool.parameters}});
    }
    body["tools"] = std::move(tools);
  }
  body.merge_patch(config.extra_body);
  return body;
}

ChatResponse anthropic_response(const json& body, const ExchangeBytes& bytes) {
  if (!body.is_object()) throw WireError("the body is not a JSON object");
  if (body.value("type", "") == "error") throw WireError("the body is an error: " + body.value("error", json()).dump());
  auto content = body.find("content");
  if (content == body.end() || !content->is_array()) throw WireError("no content array");
  ChatResponse response;
  response.message.role = Role::assistant;
  for (const json& block : *content) {
    if (!block.is_object()) throw WireError("a content block that is not an object: " + block.dump());
    std::string type = block.value("type", "");
    if (type == "text") {
      if (!block.contains("text") || !block["text"].is_string()) throw WireError("a text block without text");
      response.message.text += block["text"].get<std::string>();
    } else if (type == "tool_use") {
      ToolCall call;
      call.id = block.value("id", "");
      call.name = block.value("name", "");
      call.arguments = block.contains("input") ? block["input"].dump() : "{}";
      response.message.tool_calls.push_back(std::move(call));
    } else if (type == "thinking" || type == "redacted_thinking") {
      response.message.reasoning.push_back(
          thinking(block, type, static_cast<int>(response.message.tool_calls.size())));
    }
    // Other blocks are not part of the neutral conversation; they stay in raw.
  }
  response.stop_reason = stop_reason(body.value("stop_reason", json(nullptr)));
  response.usage = usage_of(body, bytes);
  response.raw = body;
  return response;
}

}  // namespace d2k::llm
