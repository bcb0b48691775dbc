// The reply builders of tests/support/scripted_replies.hpp, read back by the real clients: what a
// script built with them says is what the agent loop sees.
#include <gtest/gtest.h>

#include "llm_fixture.hpp"
#include "scripted_replies.hpp"

namespace d2k::llm {
namespace {

class ScriptedReplies : public LlmTest {};

TEST_F(ScriptedReplies, ReadBackTheSameByBothClients) {
  for (Provider provider : {Provider::openai, Provider::anthropic}) {
    std::string text = random_text(rng);
    std::vector<scripted::Call> calls = {{"call_" + std::to_string(rng() % 1000), "write_file",
                                          nlohmann::json{{"path", "a.cu"}, {"content", random_text(rng, 1, 500)}}.dump()},
                                         {"call_x", "compile", "{}"}};
    scripted::Tokens tokens{1000 + static_cast<int64_t>(rng() % 1000), static_cast<int64_t>(rng() % 1000),
                            static_cast<int64_t>(rng() % 300)};
    bool openai = provider == Provider::openai;
    server.push(200, openai ? scripted::openai_reply(text, calls, tokens) : scripted::anthropic_reply(text, calls, tokens));
    server.push(200, openai ? scripted::openai_reply("done") : scripted::anthropic_reply("done"));
    auto c = client(config(provider));

    ChatResponse first = c->complete(hello("go"));
    EXPECT_EQ(first.message.text, text);
    EXPECT_EQ(first.stop_reason, "tool_use");
    ASSERT_EQ(first.message.tool_calls.size(), 2u);
    for (std::size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(first.message.tool_calls[i].id, calls[i].id);
      EXPECT_EQ(first.message.tool_calls[i].name, calls[i].name);
      EXPECT_EQ(nlohmann::json::parse(first.message.tool_calls[i].arguments), nlohmann::json::parse(calls[i].arguments));
    }
    EXPECT_EQ(first.usage.input_tokens, tokens.input);
    EXPECT_EQ(first.usage.cached_input_tokens, tokens.cached);
    EXPECT_EQ(first.usage.output_tokens, tokens.output);

    ChatResponse second = c->complete(hello("again"));
    EXPECT_EQ(second.message.text, "done");
    EXPECT_EQ(second.stop_reason, "end_turn");
    EXPECT_TRUE(second.message.tool_calls.empty());
  }
}

TEST_F(ScriptedReplies, KeepInvalidOpenAiArgumentsAsWritten) {
  std::string invalid = "{\"path\": \"a.cu\", \"content\": \"" + random_text(rng);
  server.push(200, scripted::openai_reply("", {{"call_1", "write_file", invalid}}));
  ChatResponse response = client(config(Provider::openai))->complete(hello("go"));
  ASSERT_EQ(response.message.tool_calls.size(), 1u);
  EXPECT_EQ(response.message.tool_calls[0].arguments, invalid);
}

}  // namespace
}  // namespace d2k::llm
