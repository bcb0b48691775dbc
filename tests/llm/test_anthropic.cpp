// The Anthropic Messages client over real HTTP against the scripted endpoint.
#include <gtest/gtest.h>

#include "llm_fixture.hpp"

namespace d2k::llm {
namespace {

using nlohmann::json;

json message_reply(const json& content, const std::string& stop, const json& usage) {
  return {{"id", "msg_1"}, {"type", "message"}, {"role", "assistant"}, {"model", "claude-test"},
          {"content", content}, {"stop_reason", stop}, {"stop_sequence", nullptr}, {"usage", usage}};
}

json text_reply(const std::string& text) {
  return message_reply(json::array({{{"type", "text"}, {"text", text}}}), "end_turn", {{"input_tokens", 3}, {"output_tokens", 4}});
}

json error_reply(const std::string& type, const std::string& message) {
  return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

class Anthropic : public LlmTest {};

TEST_F(Anthropic, SendsSystemToolsAndPairsEveryToolUseWithAToolResult) {
  ModelConfig model = config(Provider::anthropic);
  ChatRequest request;
  request.system = random_text(rng);
  std::string user = random_text(rng), thought = random_text(rng), result_a = random_text(rng, 1, 2000),
              result_b = random_text(rng), nudge = random_text(rng);
  json args_a = {{"path", random_text(rng)}}, args_b = {{"path", random_text(rng)}, {"content", random_text(rng)}};
  request.messages = {
      {Role::user, user, {}, "", false},
      {Role::assistant, thought, {{"toolu_a", "read_file", args_a.dump()}, {"toolu_b", "write_file", args_b.dump()}}, "", false},
      {Role::tool, result_a, {}, "toolu_a", false},
      {Role::tool, result_b, {}, "toolu_b", true},
      {Role::user, nudge, {}, "", false},  // the loop's own note after the results: the same user turn
      {Role::assistant, "", {{"toolu_c", "compile", "{}"}}, "", false},
      {Role::tool, "compiled", {}, "toolu_c", false},
  };
  json schema = {{"type", "object"}, {"properties", {{"path", {{"type", "string"}}}}}};
  request.tools = {{"read_file", random_text(rng), schema}};
  server.push(200, text_reply("ok"));

  client(model)->complete(request);

  auto received = server.received();
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0].path, "/v1/messages");
  EXPECT_EQ(received[0].headers["x-api-key"], key);
  EXPECT_EQ(received[0].headers["anthropic-version"], "2023-06-01");
  EXPECT_EQ(received[0].headers.count("authorization"), 0u);
  json body = received[0].json();
  EXPECT_EQ(body["model"], model.model);
  EXPECT_EQ(body["max_tokens"], model.max_tokens);
  json cache = {{"type", "ephemeral"}};
  EXPECT_EQ(body["system"], json::array({{{"type", "text"}, {"text", request.system}, {"cache_control", cache}}}));
  EXPECT_EQ(body["temperature"], 0.25);
  EXPECT_EQ(body["tools"], json::array({{{"name", "read_file"}, {"description", request.tools[0].description}, {"input_schema", schema}}}));
  json expected = json::array({
      {{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", user}}})}},
      {{"role", "assistant"},
       {"content", json::array({{{"type", "text"}, {"text", thought}},
                                {{"type", "tool_use"}, {"id", "toolu_a"}, {"name", "read_file"}, {"input", args_a}},
                                {{"type", "tool_use"}, {"id", "toolu_b"}, {"name", "write_file"}, {"input", args_b}}})}},
      {{"role", "user"},
       {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_a"}, {"content", result_a}},
                                {{"type", "tool_result"}, {"tool_use_id", "toolu_b"}, {"content", result_b}, {"is_error", true}},
                                {{"type", "text"}, {"text", nudge}}})}},
      {{"role", "assistant"},
       {"content", json::array({{{"type", "tool_use"}, {"id", "toolu_c"}, {"name", "compile"}, {"input", json::object()}}})}},
      {{"role", "user"},
       {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_c"}, {"content", "compiled"},
                                 {"cache_control", cache}}})}},
  });
  EXPECT_EQ(body["messages"], expected);
}

TEST_F(Anthropic, LeavesOutAnEmptyAssistantTurn) {
  ModelConfig model = config(Provider::anthropic);
  model.prompt_cache = false;
  ChatRequest request = hello("first");
  request.messages.push_back({Role::assistant, "", {}, "", false});
  request.messages.push_back({Role::user, "say something", {}, "", false});
  server.push(200, text_reply("ok"));
  client(model)->complete(request);
  nlohmann::json messages = server.received().at(0).json()["messages"];
  EXPECT_EQ(messages, json::array({{{"role", "user"},
                                    {"content", json::array({{{"type", "text"}, {"text", "first"}},
                                                             {{"type", "text"}, {"text", "say something"}}})}}}));
}

TEST_F(Anthropic, WithoutPromptCacheSendsNoBreakpoints) {
  ModelConfig model = config(Provider::anthropic);
  model.prompt_cache = false;
  model.temperature.reset();
  ChatRequest request = hello(random_text(rng));
  request.system = random_text(rng);
  server.push({200, {}, text_reply("ok").dump(), 0,
               {{"json", {{"/system", request.system}, {"/messages/0/content/0/text", request.messages[0].text}}},
                {"absent", {"/messages/0/content/0/cache_control", "/tools", "/temperature", "/top_p"}}}});
  client(model)->complete(request);
  EXPECT_EQ(server.received().size(), 1u);
}

TEST_F(Anthropic, ParsesTextAndToolUseWithInputAsAJsonString) {
  ModelConfig model = config(Provider::anthropic);
  std::string text = random_text(rng, 1, 2000);
  json input = {{"path", random_text(rng)}, {"content", random_text(rng, 1, 500)}, {"lines", {1, 2, 3}}};
  json content = json::array({{{"type", "thinking"}, {"thinking", "hmm"}, {"signature", "s"}},
                              {{"type", "text"}, {"text", text}},
                              {{"type", "tool_use"}, {"id", "toolu_9"}, {"name", "write_file"}, {"input", input}}});
  server.push(200, message_reply(content, "tool_use", {{"input_tokens", 20}, {"output_tokens", 30}}));

  ChatResponse response = client(model)->complete(hello("x"));

  EXPECT_EQ(response.message.role, Role::assistant);
  EXPECT_EQ(response.message.text, text);
  EXPECT_EQ(response.stop_reason, "tool_use");
  ASSERT_EQ(response.message.tool_calls.size(), 1u);
  EXPECT_EQ(response.message.tool_calls[0].id, "toolu_9");
  EXPECT_EQ(response.message.tool_calls[0].name, "write_file");
  EXPECT_EQ(json::parse(response.message.tool_calls[0].arguments), input);
  EXPECT_EQ(response.raw["content"][0]["type"], "thinking");  // not part of the message, kept in raw
}

TEST_F(Anthropic, CountsCachedTokensAmongTheInputAndPricesThem) {
  ModelConfig model = config(Provider::anthropic);
  int64_t fresh = 1 + rng() % 1000, reads = rng() % 50000, writes = rng() % 3000, output = 1 + rng() % 4000;
  json usage = {{"input_tokens", fresh}, {"cache_read_input_tokens", reads}, {"cache_creation_input_tokens", writes},
                {"output_tokens", output}};
  server.push(200, message_reply(json::array({{{"type", "text"}, {"text", "t"}}}), "max_tokens", usage));

  ChatResponse response = client(model)->complete(hello("x"));

  EXPECT_EQ(response.stop_reason, "max_tokens");
  EXPECT_EQ(response.usage.input_tokens, fresh + reads + writes);
  EXPECT_EQ(response.usage.cached_input_tokens, reads);
  EXPECT_EQ(response.usage.output_tokens, output);
  EXPECT_EQ(response.usage.raw, usage);
  EXPECT_EQ(response.usage.cache_write_input_tokens, writes);
  double expected = (fresh * 3.0 + reads * 0.3 + writes * 3.75 + output * 15.0) / 1e6;
  EXPECT_NEAR(cost_usd(response.usage, model.prices), expected, 1e-12);
}

TEST_F(Anthropic, RetriesOverloaded529) {
  ModelConfig model = config(Provider::anthropic);
  server.push(529, error_reply("overloaded_error", "Overloaded"));
  server.push(529, error_reply("overloaded_error", "Overloaded"), {{"retry-after", "7"}});
  server.push(200, text_reply("finally"));

  ChatResponse response = client(model)->complete(hello("x"));

  EXPECT_EQ(response.message.text, "finally");
  EXPECT_EQ(response.attempts, 3);
  auto sleeps = clock->sleeps();
  ASSERT_FALSE(sleeps.empty());
  EXPECT_EQ(sleeps.back(), 3.0);  // Retry-After 7, capped at max_delay_s
  EXPECT_LE(sleeps.size(), 2u);
}

TEST_F(Anthropic, GivesUpOnPersistent529AsServer) {
  ModelConfig model = config(Provider::anthropic);
  for (int i = 0; i < model.retry.max_attempts; ++i) server.push(529, error_reply("overloaded_error", "Overloaded"));
  auto c = client(model);
  ChatError error = error_of(*c, hello("x"));
  EXPECT_EQ(error.kind(), ChatError::Kind::server);
  EXPECT_EQ(error.http_status(), 529);
  EXPECT_EQ(error.attempts(), model.retry.max_attempts);
}

TEST_F(Anthropic, ClassifiesErrorsThatAreNotRetried) {
  ModelConfig model = config(Provider::anthropic);
  auto c = client(model);
  struct Case {
    int status;
    json body;
    ChatError::Kind kind;
  } cases[] = {
      {401, error_reply("authentication_error", "invalid x-api-key"), ChatError::Kind::auth},
      {403, error_reply("permission_error", "not allowed"), ChatError::Kind::auth},
      {400, error_reply("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"), ChatError::Kind::context_length},
      {413, error_reply("request_too_large", "Request exceeds the maximum allowed number of bytes."), ChatError::Kind::context_length},
      {400, error_reply("invalid_request_error", "Your credit balance is too low to access the Anthropic API."), ChatError::Kind::spend_limit},
      {402, error_reply("billing_error", "payment required"), ChatError::Kind::spend_limit},
      {400, error_reply("invalid_request_error", "messages.1: tool_use ids were found without tool_result blocks"), ChatError::Kind::bad_request},
  };
  std::size_t sent = 0;
  for (const Case& test : cases) {
    server.push(test.status, test.body);
    ChatError error = error_of(*c, hello("x"));
    EXPECT_EQ(error.kind(), test.kind) << test.body.dump() << ": " << error.what();
    EXPECT_EQ(error.http_status(), test.status);
    EXPECT_EQ(error.attempts(), 1);
    EXPECT_EQ(server.received().size(), ++sent) << "retried: " << test.body.dump();
  }
  EXPECT_TRUE(clock->sleeps().empty());
}

TEST_F(Anthropic, AnErrorBodyWithStatus200IsAFormatError) {
  ModelConfig model = config(Provider::anthropic);
  server.push(200, error_reply("api_error", "odd"));
  ChatResponse response = client(model)->complete(hello("x"));
  EXPECT_NE(response.format_error.find("the body is an error"), std::string::npos) << response.format_error;
  EXPECT_TRUE(response.message.text.empty());
  EXPECT_TRUE(response.usage.estimated);
}

}  // namespace
}  // namespace d2k::llm
