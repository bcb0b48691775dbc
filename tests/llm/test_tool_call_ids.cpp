// Issue 18 item 10: tool-call ids that are empty or repeated, in either wire format, get harness-made
// unique ids, so that the next request pairs every call with its result.
#include <gtest/gtest.h>

#include <set>

#include "llm/wire.hpp"
#include "llm_fixture.hpp"
#include "scripted_replies.hpp"

namespace d2k::llm {
namespace {

using nlohmann::json;

TEST(ToolCallIds, EmptyAndRepeatedIdsAreReplacedAndTheOriginalKept) {
  std::vector<Message> conversation = {{Role::user, "go", {}, "", false},
                                       {Role::assistant, "", {{"a", "list_files", "{}"}, {"b", "compile", "{}"}}, "", false}};
  std::vector<ToolCall> calls = {{"", "x", "{}"}, {"c", "x", "{}"}, {"c", "x", "{}"}, {"a", "x", "{}"}, {"d2k_call_7", "x", "{}"}};
  make_tool_call_ids_unique(calls, conversation);
  EXPECT_EQ(calls[0].id, "d2k_call_3");
  EXPECT_EQ(calls[0].original_id, "");
  EXPECT_EQ(calls[1].id, "c");
  EXPECT_FALSE(calls[1].original_id.has_value());
  EXPECT_EQ(calls[2].id, "d2k_call_5");
  EXPECT_EQ(calls[2].original_id, "c");
  EXPECT_EQ(calls[3].id, "d2k_call_6");
  EXPECT_EQ(calls[3].original_id, "a");
  EXPECT_EQ(calls[4].id, "d2k_call_7");  // the endpoint's own, unique: kept
  std::vector<ToolCall> clash = {{"", "x", "{}"}};
  conversation.push_back({Role::assistant, "", {{"d2k_call_4", "x", "{}"}}, "", false});
  make_tool_call_ids_unique(clash, conversation);
  EXPECT_EQ(clash[0].id, "d2k_call_4_");
}

class ToolCallIdsOverHttp : public LlmTest {};

// The reply's calls, answered, go back in the next request with ids that match and are unique.
TEST_F(ToolCallIdsOverHttp, TheNextRequestPairsEveryCallWithItsResult) {
  for (Provider provider : {Provider::openai, Provider::anthropic}) {
    bool openai = provider == Provider::openai;
    std::vector<scripted::Call> calls = {{"", "list_files", "{}"}, {"same", "read_file", "{}"}, {"same", "compile", "{}"}};
    server.push(200, openai ? scripted::openai_reply("", calls) : scripted::anthropic_reply("", calls));
    server.push(200, openai ? scripted::openai_reply("done") : scripted::anthropic_reply("done"));
    auto c = client(config(provider));
    ChatRequest request = hello("go");
    ChatResponse first = c->complete(request);
    ASSERT_EQ(first.message.tool_calls.size(), 3u);
    request.messages.push_back(first.message);
    for (const ToolCall& call : first.message.tool_calls) request.messages.push_back({Role::tool, "ok", {}, call.id, false});
    c->complete(request);

    json body = server.received().back().json();
    std::vector<std::string> sent, answered;
    for (const json& message : body["messages"]) {
      if (openai && message["role"] == "assistant") {
        for (const json& call : message["tool_calls"]) sent.push_back(call["id"]);
      } else if (openai && message["role"] == "tool") {
        answered.push_back(message["tool_call_id"]);
      } else if (!openai) {
        for (const json& block : message["content"]) {
          if (block["type"] == "tool_use") sent.push_back(block["id"]);
          if (block["type"] == "tool_result") answered.push_back(block["tool_use_id"]);
        }
      }
    }
    EXPECT_EQ(sent, (std::vector<std::string>{"d2k_call_1", "same", "d2k_call_3"})) << body.dump();
    EXPECT_EQ(answered, sent);
    EXPECT_EQ(first.message.tool_calls[0].original_id, "");
    EXPECT_EQ(first.message.tool_calls[2].original_id, "same");
  }
}

}  // namespace
}  // namespace d2k::llm
