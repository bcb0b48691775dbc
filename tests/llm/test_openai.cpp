// The OpenAI-compatible client over real HTTP against the scripted endpoint: what it sends, what it makes
// of what comes back, and which failures it retries.
#include <gtest/gtest.h>

#include "llm_fixture.hpp"

namespace d2k::llm {
namespace {

using nlohmann::json;

json completion(const json& message, const std::string& finish, const json& usage) {
  return {{"id", "chatcmpl-1"}, {"object", "chat.completion"},
          {"choices", json::array({{{"index", 0}, {"message", message}, {"finish_reason", finish}}})}, {"usage", usage}};
}

json text_reply(const std::string& text, int64_t prompt = 10, int64_t cached = 0, int64_t completion_tokens = 5) {
  return completion({{"role", "assistant"}, {"content", text}}, "stop",
                    {{"prompt_tokens", prompt}, {"completion_tokens", completion_tokens},
                     {"prompt_tokens_details", {{"cached_tokens", cached}}}});
}

json error_reply(const std::string& type, const std::string& code, const std::string& message) {
  return {{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}}}};
}

class OpenAi : public LlmTest {};

TEST_F(OpenAi, SendsSystemToolsToolCallsAndToolResultsInItsWireFormat) {
  ModelConfig model = config(Provider::openai);
  model.top_p = 0.9;
  ChatRequest request;
  request.system = random_text(rng);
  std::string user = random_text(rng), thought = random_text(rng), result = random_text(rng, 1, 2000);
  std::string good_args = json{{"path", random_text(rng)}}.dump();
  std::string bad_args = "{\"path\": \"" + random_text(rng) + "\"";  // cut short: invalid JSON, sent back as it was
  request.messages = {
      {Role::user, user, {}, "", false},
      {Role::assistant, thought, {{"call_a", "read_file", good_args}, {"call_b", "write_file", bad_args}}, "", false},
      {Role::tool, result, {}, "call_a", false},
      {Role::tool, "error: arguments are not valid JSON", {}, "call_b", true},
      {Role::assistant, "", {{"call_c", "compile", "{}"}}, "", false},
  };
  json schema = {{"type", "object"}, {"properties", {{"path", {{"type", "string"}}}}}, {"required", {"path"}}};
  request.tools = {{"read_file", random_text(rng), schema}, {"compile", "Compiles.", {{"type", "object"}}}};
  server.push(200, text_reply("ok"));

  client(model)->complete(request);

  auto received = server.received();
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0].method, "POST");
  EXPECT_EQ(received[0].path, "/v1/chat/completions");
  EXPECT_EQ(received[0].headers["authorization"], "Bearer " + key);
  EXPECT_EQ(received[0].headers["content-type"], "application/json");
  json body = received[0].json();
  json expected_messages = json::array({
      {{"role", "system"}, {"content", request.system}},
      {{"role", "user"}, {"content", user}},
      {{"role", "assistant"},
       {"content", thought},
       {"tool_calls",
        {{{"id", "call_a"}, {"type", "function"}, {"function", {{"name", "read_file"}, {"arguments", good_args}}}},
         {{"id", "call_b"}, {"type", "function"}, {"function", {{"name", "write_file"}, {"arguments", bad_args}}}}}}},
      {{"role", "tool"}, {"tool_call_id", "call_a"}, {"content", result}},
      {{"role", "tool"}, {"tool_call_id", "call_b"}, {"content", "error: arguments are not valid JSON"}},
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls", {{{"id", "call_c"}, {"type", "function"}, {"function", {{"name", "compile"}, {"arguments", "{}"}}}}}}},
  });
  EXPECT_EQ(body["messages"], expected_messages);
  EXPECT_EQ(body["model"], model.model);
  EXPECT_EQ(body["max_tokens"], model.max_tokens);
  EXPECT_EQ(body["temperature"], 0.25);
  EXPECT_EQ(body["top_p"], 0.9);
  json expected_tools = json::array({
      {{"type", "function"}, {"function", {{"name", "read_file"}, {"description", request.tools[0].description}, {"parameters", schema}}}},
      {{"type", "function"}, {"function", {{"name", "compile"}, {"description", "Compiles."}, {"parameters", {{"type", "object"}}}}}},
  });
  EXPECT_EQ(body["tools"], expected_tools);
}

TEST_F(OpenAi, NamesMaxTokensAsConfiguredAndMergesExtraBody) {
  ModelConfig model = config(Provider::openai);
  model.max_tokens_field = "max_completion_tokens";
  model.extra_body = {{"reasoning_effort", "high"}, {"temperature", 1.0}, {"metadata", {{"run", random_text(rng)}}}};
  server.push({200, {}, text_reply("ok").dump(), 0,
               {{"json", {{"/max_completion_tokens", model.max_tokens}, {"/reasoning_effort", "high"}, {"/temperature", 1.0},
                          {"/metadata/run", model.extra_body["metadata"]["run"]}}},
                {"absent", {"/max_tokens"}}}});
  client(model)->complete(hello("x"));
  EXPECT_EQ(server.received().size(), 1u);
}

TEST_F(OpenAi, SendsBytesThatAreNotUtf8AsReplacementCharacters) {
  ModelConfig model = config(Provider::openai);
  ChatRequest request = hello("compile");
  request.messages.push_back({Role::assistant, "", {{"call_1", "compile", "{}"}}, "", false});
  request.messages.push_back({Role::tool, "error at byte \xff\xfe: bad", {}, "call_1", true});
  server.push({200, {}, text_reply("ok").dump(), 0, {{"json", {{"/messages/2/content", "error at byte \ufffd\ufffd: bad"}}}}});
  EXPECT_EQ(client(model)->complete(request).message.text, "ok");
}

TEST_F(OpenAi, LeavesOutWhatIsNotSet) {
  ModelConfig model = config(Provider::openai);
  model.temperature.reset();
  model.api_key_env = "";  // a local server without keys
  server.push({200, {}, text_reply("ok").dump(), 0,
               {{"absent", {"/tools", "/temperature", "/top_p"}}, {"headers", {{"authorization", nullptr}}},
                {"json", {{"/messages/0/role", "user"}}}}});
  client(model)->complete(hello("hi"));
  EXPECT_EQ(server.received().size(), 1u);
}

TEST_F(OpenAi, ParsesTextUsageAndCost) {
  ModelConfig model = config(Provider::openai);
  std::string text = random_text(rng, 1, 3000);
  int64_t prompt = 1000 + rng() % 100000, cached = rng() % 1000, output = 1 + rng() % 5000;
  server.push(200, text_reply(text, prompt, cached, output));

  ChatResponse response = client(model)->complete(hello(random_text(rng)));

  EXPECT_EQ(response.message.role, Role::assistant);
  EXPECT_EQ(response.message.text, text);
  EXPECT_TRUE(response.message.tool_calls.empty());
  EXPECT_EQ(response.stop_reason, "end_turn");
  EXPECT_EQ(response.usage.input_tokens, prompt);
  EXPECT_EQ(response.usage.cached_input_tokens, cached);
  EXPECT_EQ(response.usage.output_tokens, output);
  EXPECT_EQ(response.usage.raw["prompt_tokens"], prompt);
  EXPECT_EQ(response.raw["id"], "chatcmpl-1");
  EXPECT_EQ(response.attempts, 1);
  double expected = ((prompt - cached) * 3.0 + cached * 0.3 + output * 15.0) / 1e6;
  EXPECT_NEAR(cost_usd(response.usage, model.prices), expected, 1e-12);
}

TEST_F(OpenAi, KeepsToolCallArgumentsRawEvenWhenInvalid) {
  ModelConfig model = config(Provider::openai);
  std::string valid = json{{"path", random_text(rng)}, {"n", rng() % 100}}.dump();
  std::string invalid = "{\"content\": \"" + random_text(rng) + "\", }";
  json message = {{"role", "assistant"},
                  {"content", nullptr},
                  {"tool_calls",
                   {{{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "read_file"}, {"arguments", valid}}}},
                    {{"id", "call_2"}, {"type", "function"}, {"function", {{"name", "write_file"}, {"arguments", invalid}}}}}}};
  server.push(200, completion(message, "tool_calls", {{"prompt_tokens", 5}, {"completion_tokens", 7}}));

  ChatResponse response = client(model)->complete(hello("go"));

  EXPECT_EQ(response.stop_reason, "tool_use");
  EXPECT_EQ(response.message.text, "");
  ASSERT_EQ(response.message.tool_calls.size(), 2u);
  EXPECT_EQ(response.message.tool_calls[0].id, "call_1");
  EXPECT_EQ(response.message.tool_calls[0].name, "read_file");
  EXPECT_EQ(response.message.tool_calls[0].arguments, valid);
  EXPECT_EQ(response.message.tool_calls[1].name, "write_file");
  EXPECT_EQ(response.message.tool_calls[1].arguments, invalid);
  EXPECT_EQ(response.usage.cached_input_tokens, 0);  // no prompt_tokens_details
}

TEST_F(OpenAi, MapsFinishReasons) {
  ModelConfig model = config(Provider::openai);
  auto c = client(model);
  std::pair<const char*, const char*> cases[] = {{"stop", "end_turn"}, {"length", "max_tokens"},
                                                 {"tool_calls", "tool_use"}, {"content_filter", "other:content_filter"}};
  for (auto [finish, expected] : cases) {
    server.push(200, completion({{"role", "assistant"}, {"content", "x"}}, finish, {{"prompt_tokens", 1}}));
    EXPECT_EQ(c->complete(hello("x")).stop_reason, expected) << finish;
  }
}

TEST_F(OpenAi, HonorsRetryAfterOn429) {
  ModelConfig model = config(Provider::openai);
  server.push(429, error_reply("requests", "rate_limit_exceeded", "Rate limit reached"), {{"Retry-After", "2"}});
  server.push(200, text_reply("after the wait"));

  ChatResponse response = client(model)->complete(hello("x"));

  EXPECT_EQ(response.message.text, "after the wait");
  EXPECT_EQ(response.attempts, 2);
  EXPECT_EQ(clock->sleeps(), std::vector<double>{2.0});
  EXPECT_DOUBLE_EQ(response.seconds, 2.0);
  EXPECT_EQ(server.received().size(), 2u);
}

TEST_F(OpenAi, HonorsRetryAfterAsAnHttpDate) {
  ModelConfig model = config(Provider::openai);
  clock = std::make_shared<FakeClock>(1'767'225'600.0);  // Thu, 01 Jan 2026 00:00:00 GMT
  server.push(503, error_reply("server_error", "", "busy"), {{"Retry-After", "Thu, 01 Jan 2026 00:00:03 GMT"}});
  server.push(200, text_reply("ok"));
  client(model)->complete(hello("x"));
  EXPECT_EQ(clock->sleeps(), std::vector<double>{3.0});
}

TEST_F(OpenAi, CapsRetryAfterAtTheLongestDelay) {
  ModelConfig model = config(Provider::openai);
  server.push(429, error_reply("requests", "", "slow"), {{"retry-after-ms", "120000"}});
  server.push(200, text_reply("ok"));
  client(model)->complete(hello("x"));
  EXPECT_EQ(clock->sleeps(), std::vector<double>{model.retry.max_delay_s});
}

TEST_F(OpenAi, Retries500ThenSucceeds) {
  ModelConfig model = config(Provider::openai);
  server.push(500, error_reply("server_error", "", "internal"));
  server.push(502, "<html>bad gateway</html>");
  server.push(200, text_reply("third time"));

  ChatResponse response = client(model)->complete(hello("x"));

  EXPECT_EQ(response.message.text, "third time");
  EXPECT_EQ(response.attempts, 3);
  auto sleeps = clock->sleeps();
  ASSERT_LE(sleeps.size(), 2u);  // a jitter of exactly 0 asks for no sleep at all
  double total = 0;
  for (double s : sleeps) total += s;
  EXPECT_LE(total, model.retry.base_delay_s * 3);  // at most 0.5 then at most 1.0
  EXPECT_DOUBLE_EQ(response.seconds, total);
}

TEST_F(OpenAi, DoesNotRetryAuthenticationErrors) {
  ModelConfig model = config(Provider::openai);
  server.push(401, error_reply("invalid_request_error", "invalid_api_key", "Incorrect API key provided"));
  server.push(200, text_reply("never sent"));
  auto c = client(model);
  ChatError error = error_of(*c, hello("x"));
  EXPECT_EQ(error.kind(), ChatError::Kind::auth);
  EXPECT_EQ(error.http_status(), 401);
  EXPECT_EQ(error.attempts(), 1);
  EXPECT_NE(std::string(error.what()).find("Incorrect API key"), std::string::npos) << error.what();
  EXPECT_NE(error.body().find("invalid_api_key"), std::string::npos);
  EXPECT_EQ(server.received().size(), 1u);
  EXPECT_TRUE(clock->sleeps().empty());
}

TEST_F(OpenAi, DoesNotRetryInsufficientQuota) {
  ModelConfig model = config(Provider::openai);
  server.push(429, error_reply("insufficient_quota", "insufficient_quota", "You exceeded your current quota"),
              {{"Retry-After", "1"}});
  auto c = client(model);
  ChatError error = error_of(*c, hello("x"));
  EXPECT_EQ(error.kind(), ChatError::Kind::spend_limit);
  EXPECT_EQ(error.http_status(), 429);
  EXPECT_EQ(server.received().size(), 1u);
  EXPECT_TRUE(clock->sleeps().empty());
}

TEST_F(OpenAi, ReportsContextLength) {
  ModelConfig model = config(Provider::openai);
  server.push(400, error_reply("invalid_request_error", "context_length_exceeded",
                               "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens."));
  auto c = client(model);
  EXPECT_EQ(error_of(*c, hello("x")).kind(), ChatError::Kind::context_length);
  EXPECT_EQ(server.received().size(), 1u);
}

TEST_F(OpenAi, OtherClientErrorsAreBadRequests) {
  ModelConfig model = config(Provider::openai);
  server.push(404, error_reply("invalid_request_error", "model_not_found", "The model does not exist"));
  auto c = client(model);
  ChatError error = error_of(*c, hello("x"));
  EXPECT_EQ(error.kind(), ChatError::Kind::bad_request);
  EXPECT_EQ(error.http_status(), 404);
  EXPECT_EQ(server.received().size(), 1u);
}

TEST_F(OpenAi, GivesUpAfterMaxAttemptsOf429AsRateLimited) {
  ModelConfig model = config(Provider::openai);
  model.retry = {5, 0.5, 3.0};
  for (int i = 0; i < 5; ++i) server.push(429, error_reply("requests", "rate_limit_exceeded", "slow down"));
  auto c = client(model);
  ChatError error = error_of(*c, hello("x"));
  EXPECT_EQ(error.kind(), ChatError::Kind::rate_limited);
  EXPECT_EQ(error.attempts(), 5);
  EXPECT_EQ(server.received().size(), 5u);
  // Full jitter: before retry k a uniform draw in [0, min(3, 0.5 * 2^(k-1))]. Zero draws sleep not at all.
  auto sleeps = clock->sleeps();
  EXPECT_LE(sleeps.size(), 4u);
  EXPECT_GE(sleeps.size(), 3u);  // four exact zeros from a continuous draw do not happen
  for (double s : sleeps) {
    EXPECT_GT(s, 0);
    EXPECT_LE(s, 3.0);
  }
}

TEST_F(OpenAi, GivesUpAfterMaxAttemptsOf5xxAsServer) {
  ModelConfig model = config(Provider::openai);
  model.retry = {3, 1.0, 60.0};
  for (int i = 0; i < 3; ++i) server.push(500 + static_cast<int>(rng() % 5), error_reply("server_error", "", "oops"));
  auto c = client(model);
  ChatError error = error_of(*c, hello("x"));
  EXPECT_EQ(error.kind(), ChatError::Kind::server);
  EXPECT_EQ(error.attempts(), 3);
  EXPECT_EQ(server.received().size(), 3u);
}

TEST_F(OpenAi, AnUnparseableSuccessIsAFormatErrorNotRetried) {
  ModelConfig model = config(Provider::openai);
  server.push(200, std::string("{\"choices\": [ {\"message\": "));
  auto c = client(model);
  ChatResponse response = c->complete(hello("x"));
  EXPECT_NE(response.format_error.find("HTTP 200 with a reply that is not a openai response"), std::string::npos)
      << response.format_error;
  EXPECT_EQ(response.raw, "{\"choices\": [ {\"message\": ");
  EXPECT_EQ(server.received().size(), 1u);

  server.push(200, json{{"object", "chat.completion"}, {"choices", json::array()}});
  EXPECT_NE(c->complete(hello("x")).format_error.find("no choices"), std::string::npos);
}

TEST_F(OpenAi, RetriesNetworkErrorsAndTimesOutEachAttempt) {
  ModelConfig model = config(Provider::openai);
  model.timeout_s = 1.5;  // long enough for a loaded machine to answer the second attempt in time
  server.push({200, {}, text_reply("too late").dump(), 30000, {}});  // the client gives up on this one
  server.push(200, text_reply("in time"));

  ChatResponse response = client(model)->complete(hello("x"));

  EXPECT_EQ(response.message.text, "in time");
  EXPECT_EQ(response.attempts, 2);
  EXPECT_EQ(server.received().size(), 2u);
}

TEST_F(OpenAi, ANetworkFailureThatPersistsIsNetwork) {
  ModelConfig model = config(Provider::openai);
  int port = server.port();
  server.stop();  // nothing listens there any more: connections are refused
  model.base_url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  model.retry = {3, 0.5, 3.0};
  auto c = client(model);
  ChatError error = error_of(*c, hello("x"));
  EXPECT_EQ(error.kind(), ChatError::Kind::network);
  EXPECT_EQ(error.http_status(), 0);
  EXPECT_EQ(error.attempts(), 3);
}

TEST_F(OpenAi, AMissingKeyIsAnAuthErrorBeforeAnyRequest) {
  ModelConfig model = config(Provider::openai);
  model.api_key_env = "D2K_TEST_LLM_KEY_THAT_IS_NOT_SET";
  ::unsetenv(model.api_key_env.c_str());
  try {
    make_client(model);
    FAIL() << "make_client returned";
  } catch (const ChatError& error) {
    EXPECT_EQ(error.kind(), ChatError::Kind::auth);
    EXPECT_NE(std::string(error.what()).find("D2K_TEST_LLM_KEY_THAT_IS_NOT_SET"), std::string::npos);
  }
}

TEST_F(OpenAi, TheRateLimiterSpacesRequestsOfEveryClientOfAnEndpoint) {
  ModelConfig model = config(Provider::openai);
  model.requests_per_minute = 30;  // one every 2 s
  auto first = client(model);
  auto second = client(model);  // same base_url: the same bucket
  for (int i = 0; i < 5; ++i) server.push(200, text_reply("r" + std::to_string(i)));

  first->complete(hello("1"));
  second->complete(hello("2"));
  first->complete(hello("3"));
  clock->advance(10);  // idle long enough to refill; the bucket holds one request, not five
  second->complete(hello("4"));
  first->complete(hello("5"));

  EXPECT_EQ(clock->sleeps(), (std::vector<double>{2.0, 2.0, 2.0}));
  EXPECT_EQ(server.received().size(), 5u);
}

}  // namespace
}  // namespace d2k::llm
