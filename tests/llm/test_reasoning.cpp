// Issue 18 item 6: reasoning that comes with a reply (Anthropic thinking and redacted_thinking blocks,
// OpenAI-compatible reasoning_content or reasoning) is kept and sent back, unchanged and in its place.
#include <gtest/gtest.h>

#include "llm_fixture.hpp"

namespace d2k::llm {
namespace {

using nlohmann::json;

class Reasoning : public LlmTest {
 protected:
  // The request after `reply`: its message with a result for each of its calls.
  json next_request(ChatClient& c, const ChatResponse& reply) {
    ChatRequest request = hello("go");
    request.messages.push_back(reply.message);
    for (const ToolCall& call : reply.message.tool_calls) request.messages.push_back({Role::tool, "ok", {}, call.id, false});
    c.complete(request);
    return server.received().back().json();
  }
};

TEST_F(Reasoning, AnthropicThinkingBlocksGoBackUnchangedAndInTheirPlace) {
  ModelConfig model = config(Provider::anthropic);
  model.prompt_cache = false;
  std::string signature = "EqQBCkYIARgCIkB" + std::to_string(rng());
  json content = json::array({
      {{"type", "thinking"}, {"thinking", random_text(rng, 1, 500)}, {"signature", signature}},
      {{"type", "text"}, {"text", "Looking."}},
      {{"type", "tool_use"}, {"id", "toolu_a"}, {"name", "list_files"}, {"input", json::object()}},
      {{"type", "redacted_thinking"}, {"data", "EmwKAhgBEgy" + std::to_string(rng())}},
      {{"type", "thinking"}, {"thinking", "then read it"}, {"signature", "sig2"}},
      {{"type", "tool_use"}, {"id", "toolu_b"}, {"name", "read_file"}, {"input", {{"path", "TASK.md"}}}},
  });
  server.push(200, json{{"type", "message"}, {"role", "assistant"}, {"content", content}, {"stop_reason", "tool_use"},
                        {"usage", {{"input_tokens", 5}, {"output_tokens", 9}}}});
  server.push(200, json{{"type", "message"}, {"role", "assistant"}, {"content", json::array()}, {"stop_reason", "end_turn"},
                        {"usage", {{"input_tokens", 5}, {"output_tokens", 1}}}});
  auto c = client(model);
  ChatResponse reply = c->complete(hello("go"));
  ASSERT_EQ(reply.message.reasoning.size(), 3u);
  EXPECT_EQ(reply.message.reasoning[0].signature, signature);
  EXPECT_EQ(reply.message.reasoning[1].type, "redacted_thinking");
  EXPECT_EQ(reply.message.reasoning[1].after_calls, 1);

  json sent = next_request(*c, reply);
  EXPECT_EQ(sent["messages"][1]["role"], "assistant");
  EXPECT_EQ(sent["messages"][1]["content"], content);
}

TEST_F(Reasoning, AThinkingBlockWithoutItsSignatureIsAFormatError) {
  server.push(200, json{{"type", "message"}, {"content", json::array({{{"type", "thinking"}, {"thinking", "hm"}}})},
                        {"stop_reason", "end_turn"}, {"usage", {{"input_tokens", 5}, {"output_tokens", 1}}}});
  ChatResponse reply = client(config(Provider::anthropic))->complete(hello("go"));
  EXPECT_NE(reply.format_error.find("a thinking block without signature"), std::string::npos) << reply.format_error;
}

TEST_F(Reasoning, OpenAiReasoningGoesBackUnderTheFieldItCameIn) {
  for (const char* field : {"reasoning_content", "reasoning"}) {
    std::string thought = random_text(rng, 1, 400);
    json message = {{"role", "assistant"}, {"content", nullptr}, {field, thought},
                    {"tool_calls", json::array({{{"id", "call_1"}, {"type", "function"},
                                                 {"function", {{"name", "compile"}, {"arguments", "{}"}}}}})}};
    server.push(200, json{{"choices", json::array({{{"message", message}, {"finish_reason", "tool_calls"}}})},
                          {"usage", {{"prompt_tokens", 5}, {"completion_tokens", 9}}}});
    server.push(200, json{{"choices", json::array({{{"message", {{"role", "assistant"}, {"content", "ok"}}}, {"finish_reason", "stop"}}})},
                          {"usage", {{"prompt_tokens", 5}, {"completion_tokens", 1}}}});
    auto c = client(config(Provider::openai));
    ChatResponse reply = c->complete(hello("go"));
    ASSERT_EQ(reply.message.reasoning.size(), 1u);
    EXPECT_EQ(reply.message.reasoning[0].type, field);
    json sent = next_request(*c, reply)["messages"][1];
    EXPECT_EQ(sent[field], thought) << sent.dump();
    EXPECT_EQ(sent.size(), 4u) << "role, content, tool_calls and the one reasoning field: " << sent.dump();
  }
}

}  // namespace
}  // namespace d2k::llm
