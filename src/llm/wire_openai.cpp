// OpenAI-compatible chat completions (POST {base_url}/chat/completions). Tool calls carry their
// arguments as a JSON string, passed through untouched both ways: the model may write invalid JSON and
// the agent loop tells it so.
#include <string>

#include <fmt/format.h>

#include "llm/wire.hpp"

namespace d2k::llm {
namespace {

using nlohmann::json;

json message_json(const Message& message) {
  switch (message.role) {
    case Role::user:
      return {{"role", "user"}, {"content", message.text}};
    case Role::tool:
      return {{"role", "tool"}, {"tool_call_id", message.tool_call_id}, {"content", message.text}};
    case Role::assistant: {
      json out = {{"role", "assistant"}};
      // An assistant turn of tool calls only has content null; an empty string is refused by some servers.
      out["content"] = message.text.empty() && !message.tool_calls.empty() ? json(nullptr) : json(message.text);
      if (!message.tool_calls.empty()) {
        json calls = json::array();
        for (const ToolCall& call : message.tool_calls) {
          calls.push_back({{"id", call.id},
                           {"type", "function"},
                           {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        }
        out["tool_calls"] = std::move(calls);
      }
      for (const Reasoning& r : message.reasoning) {
        if (r.type == "reasoning_content" || r.type == "reasoning") out[r.type] = r.text;
      }
      return out;
    }
  }
  return {};
}

std::string stop_reason(const json& finish) {
  if (!finish.is_string()) return "other:" + finish.dump();
  std::string reason = finish.get<std::string>();
  if (reason == "stop") return "end_turn";
  if (reason == "tool_calls" || reason == "function_call") return "tool_use";
  if (reason == "length") return "max_tokens";
  return "other:" + reason;
}

// prompt_tokens and completion_tokens, each estimated when missing; cached_tokens 0 when missing.
Usage usage_of(const json& body, const ExchangeBytes& bytes) {
  Usage usage;
  auto it = body.find("usage");
  if (it != body.end() && !it->is_null() && !it->is_object()) throw WireError("usage = " + it->dump() + ": not an object");
  if (it != body.end() && it->is_object()) usage.raw = *it;
  const json& raw = usage.raw;
  auto input = token_count(raw, "prompt_tokens", "usage");
  auto output = token_count(raw, "completion_tokens", "usage");
  if (raw.is_object()) {
    if (auto details = raw.find("prompt_tokens_details"); details != raw.end()) {
      usage.cached_input_tokens = token_count(*details, "cached_tokens", "usage.prompt_tokens_details").value_or(0);
    }
  }
  if (input && usage.cached_input_tokens > *input) {
    throw WireError(fmt::format("usage.prompt_tokens_details.cached_tokens = {}: more than usage.prompt_tokens = {}",
                                usage.cached_input_tokens, *input));
  }
  usage.input_tokens = input.value_or(estimated_tokens(bytes.request));
  usage.output_tokens = output.value_or(estimated_tokens(bytes.reply));
  usage.estimated = !input || !output;
  return usage;
}

}  // namespace

json openai_request(const ModelConfig& config, const ChatRequest& request) {
  json messages = json::array();
  if (!request.system.empty()) messages.push_back({{"role", "system"}, {"content", request.system}});
  for (const Message& message : request.messages) messages.push_back(message_json(message));
  json body = {{"model", config.model}, {"messages", std::move(messages)}, {config.max_tokens_field, config.max_tokens}};
  if (config.temperature) body["temperature"] = *config.temperature;
  if (config.top_p) body["top_p"] = *config.top_p;
  if (!request.tools.empty()) {
    json tools = json::array();
    for (const ToolSpec& tool : request.tools) {
      tools.push_back({{"type", "function"},
                       {"function", {{"name", tool.name}, {"description", tool.description}, {"parameters", tool.parameters}}}});
    }
    body["tools"] = std::move(tools);
  }
  body.merge_patch(config.extra_body);
  return body;
}

ChatResponse openai_response(const json& body, const ExchangeBytes& bytes) {
  if (!body.is_object()) throw WireError("the body is not a JSON object");
  if (body.contains("error")) throw WireError("the body is an error: " + body["error"].dump());
  auto choices = body.find("choices");
  if (choices == body.end() || !choices->is_array() || choices->empty()) throw WireError("no choices");
  const json& choice = (*choices)[0];
  if (!choice.is_object() || !choice.contains("message") || !choice["message"].is_object()) {
    throw WireError("choices[0] has no message object");
  }
  const json& message = choice["message"];
  ChatResponse response;
  response.message.role = Role::assistant;
  if (auto content = message.find("content"); content != message.end()) {
    if (content->is_string()) {
      response.message.text = content->get<std::string>();
    } else if (content->is_array()) {  // some compatible servers send content parts
      for (const json& part : *content) {
        if (part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string()) {
          response.message.text += part["text"].get<std::string>();
        }
      }
    } else if (!content->is_null()) {
      throw WireError("choices[0].message.content is neither a string nor null");
    }
  }
  // reasoning_content (DeepSeek, vLLM, SGLang) or reasoning (newer vLLM, OpenRouter): kept under the
  // name it came in, to go back under it.
  for (const char* field : {"reasoning_content", "reasoning"}) {
    auto it = message.find(field);
    if (it == message.end() || !it->is_string() || it->get<std::string>().empty()) continue;
    response.message.reasoning.push_back({field, it->get<std::string>(), "", "", 0});
    break;
  }
  if (auto calls = message.find("tool_calls"); calls != message.end() && !calls->is_null()) {
    if (!calls->is_array()) throw WireError("choices[0].message.tool_calls is not an array");
    for (const json& call : *calls) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
        throw WireError("a tool call without a function object: " + call.dump());
      }
      const json& function = call["function"];
      ToolCall out;
      out.id = call.value("id", "");
      out.name = function.value("name", "");
      if (auto arguments = function.find("arguments"); arguments != function.end()) {
        // A string is kept byte for byte; a server that sends an object gets it serialized.
        out.arguments = arguments->is_string() ? arguments->get<std::string>() : arguments->dump();
      }
      response.message.tool_calls.push_back(std::move(out));
    }
  }
  response.stop_reason = stop_reason(choice.value("finish_reason", json(nullptr)));
  response.usage = usage_of(body, bytes);
  response.raw = body;
  return response;
}

ProviderError provider_error(const std::string& body) {
  ProviderError out;
  json parsed = json::parse(body, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    out.message = body.substr(0, 500);
    return out;
  }
  const json* error = &parsed;
  if (auto it = parsed.find("error"); it != parsed.end()) {
    if (it->is_object()) {
      error = &*it;
    } else if (it->is_string()) {
      out.message = it->get<std::string>();
      return out;
    }
  }
  auto text = [&](const char* key) {
    auto it = error->find(key);
    if (it == error->end()) return std::string();
    return it->is_string() ? it->get<std::string>() : (it->is_null() ? std::string() : it->dump());
  };
  out.type = text("type");
  out.code = text("code");
  out.message = text("message");
  return out;
}

}  // namespace d2k::llm
