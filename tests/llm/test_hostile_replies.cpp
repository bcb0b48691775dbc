// Both clients against an endpoint that answers 200 with something d2k cannot use: broken JSON or
// UTF-16, a reply over the size cap, usage that is missing or impossible. Each is one response with
// format_error set (never a thrown error that ends a run, never a count added blindly).
#include <gtest/gtest.h>

#include "llm_fixture.hpp"
#include "scripted_replies.hpp"

namespace d2k::llm {
namespace {

using nlohmann::json;

class HostileReplies : public LlmTest {
 protected:
  // A reply carrying `usage` as given (null: no usage object at all).
  std::string reply_with_usage(Provider provider, const json& usage) {
    json body = provider == Provider::openai ? scripted::openai_reply("hi") : scripted::anthropic_reply("hi");
    if (usage.is_null()) body.erase("usage");
    else body["usage"] = usage;
    return body.dump();
  }
};

TEST_F(HostileReplies, ALoneSurrogateOrInvalidUtf8IsOneFormatErrorAndTheClientGoesOn) {
  for (Provider provider : {Provider::openai, Provider::anthropic}) {
    bool openai = provider == Provider::openai;
    auto c = client(config(provider));
    std::string good = (openai ? scripted::openai_reply("TEXT") : scripted::anthropic_reply("TEXT")).dump();
    std::string surrogate = good, not_utf8 = good;
    surrogate.replace(surrogate.find("TEXT"), 4, "a\\ud800b");
    not_utf8.replace(not_utf8.find("TEXT"), 4, "a\xff\xfe b");
    server.push(200, json(surrogate));
    server.push(200, json(not_utf8));
    server.push(200, json(good));

    ChatResponse first = c->complete(hello("x"));
    EXPECT_NE(first.format_error.find("surrogate"), std::string::npos) << first.format_error;
    EXPECT_NE(first.format_error.find("HTTP 200"), std::string::npos) << first.format_error;
    EXPECT_TRUE(first.message.text.empty());
    EXPECT_TRUE(first.message.tool_calls.empty());
    EXPECT_EQ(first.raw, surrogate);
    ChatResponse second = c->complete(hello("x"));
    EXPECT_NE(second.format_error.find("UTF-8"), std::string::npos) << second.format_error;
    ChatResponse third = c->complete(hello("x"));
    EXPECT_EQ(third.format_error, "");
    EXPECT_EQ(third.message.text, "TEXT");
  }
}

TEST_F(HostileReplies, AReplyOverTheCapIsAFormatErrorAndOnlyItsStartIsKept) {
  ModelConfig model = config(Provider::openai);
  model.max_reply_bytes = 8192;
  std::string huge = scripted::openai_reply(std::string(200000, 'a')).dump();
  for (bool chunked : {false, true}) {
    scripted::Step step;
    step.body = huge;
    step.chunked = chunked;
    server.push(step);
    ChatResponse response = client(model)->complete(hello("x"));
    EXPECT_NE(response.format_error.find("larger than max_reply_bytes (8192 bytes)"), std::string::npos)
        << response.format_error;
    EXPECT_LE(response.raw.get<std::string>().size(), 4096u);
    EXPECT_TRUE(response.message.text.empty());
  }
  // At the cap exactly is fine.
  std::string fits = scripted::openai_reply("ok").dump();
  model.max_reply_bytes = fits.size();
  server.push(200, json(fits));
  EXPECT_EQ(client(model)->complete(hello("x")).format_error, "");
}

TEST_F(HostileReplies, MissingUsageIsEstimatedFromTheBytesOfRequestAndReply) {
  for (Provider provider : {Provider::openai, Provider::anthropic}) {
    bool openai = provider == Provider::openai;
    auto c = client(config(provider));
    std::string none = reply_with_usage(provider, nullptr);
    std::string half = reply_with_usage(provider, openai ? json{{"prompt_tokens", 7}} : json{{"input_tokens", 7}});
    std::string nulls = reply_with_usage(provider, openai ? json{{"prompt_tokens", nullptr}, {"completion_tokens", 3}}
                                                         : json{{"input_tokens", nullptr}, {"output_tokens", 3}});
    for (const std::string& body : {none, half, nulls}) server.push(200, json(body));

    ChatResponse r1 = c->complete(hello(random_text(rng, 100, 400)));
    std::size_t request = server.received().back().body.size();
    EXPECT_TRUE(r1.usage.estimated);
    EXPECT_EQ(r1.usage.input_tokens, static_cast<int64_t>((request + 3) / 4));
    EXPECT_EQ(r1.usage.output_tokens, static_cast<int64_t>((none.size() + 3) / 4));
    EXPECT_EQ(r1.format_error, "");

    ChatResponse r2 = c->complete(hello("x"));
    EXPECT_TRUE(r2.usage.estimated);
    EXPECT_EQ(r2.usage.input_tokens, 7);
    EXPECT_EQ(r2.usage.output_tokens, static_cast<int64_t>((half.size() + 3) / 4));

    ChatResponse r3 = c->complete(hello("x"));
    EXPECT_TRUE(r3.usage.estimated);
    EXPECT_EQ(r3.usage.input_tokens, static_cast<int64_t>((server.received().back().body.size() + 3) / 4));
    EXPECT_EQ(r3.usage.output_tokens, 3);
  }
  // A complete usage is not an estimate.
  server.push(200, scripted::openai_reply("hi"));
  EXPECT_FALSE(client(config(Provider::openai))->complete(hello("x")).usage.estimated);
}

TEST_F(HostileReplies, NegativeOrAbsurdTokenCountsAreFormatErrorsNamingTheFieldAndValue) {
  struct Case {
    Provider provider;
    json usage;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {Provider::openai, {{"prompt_tokens", -5}, {"completion_tokens", 2}}, "usage.prompt_tokens = -5: not a token count"},
      {Provider::openai, {{"prompt_tokens", 5}, {"completion_tokens", 1000000000000}}, "usage.completion_tokens = 1000000000000"},
      {Provider::openai, {{"prompt_tokens", "12"}, {"completion_tokens", 2}}, "usage.prompt_tokens = \"12\""},
      {Provider::openai, {{"prompt_tokens", 10}, {"completion_tokens", 2}, {"prompt_tokens_details", {{"cached_tokens", 50}}}},
       "usage.prompt_tokens_details.cached_tokens = 50: more than usage.prompt_tokens = 10"},
      {Provider::openai, "lots", "usage = \"lots\": not an object"},
      {Provider::anthropic, {{"input_tokens", 5}, {"output_tokens", -1}}, "usage.output_tokens = -1"},
      {Provider::anthropic, {{"input_tokens", 5}, {"output_tokens", 1}, {"cache_read_input_tokens", 2.5}},
       "usage.cache_read_input_tokens = 2.5"},
  };
  for (const Case& test : cases) {
    server.push(200, json(reply_with_usage(test.provider, test.usage)));
    ChatResponse response = client(config(test.provider))->complete(hello("x"));
    EXPECT_NE(response.format_error.find(test.expected), std::string::npos) << response.format_error;
    EXPECT_TRUE(response.usage.estimated);
    EXPECT_GT(response.usage.input_tokens, 0);
    EXPECT_GT(response.usage.output_tokens, 0);
  }
  // Whole numbers written as floats are counts.
  server.push(200, json(reply_with_usage(Provider::openai, {{"prompt_tokens", 12.0}, {"completion_tokens", 3}})));
  ChatResponse response = client(config(Provider::openai))->complete(hello("x"));
  EXPECT_EQ(response.format_error, "");
  EXPECT_EQ(response.usage.input_tokens, 12);
}

}  // namespace
}  // namespace d2k::llm

namespace d2k::llm {
namespace {

// Issue 18 item 12: an endpoint that echoes the key (an error body, a proxy's dump of the headers, a
// reply) never gets it past the client.
TEST_F(HostileReplies, AnEchoedKeyNeverLeavesTheClient) {
  for (Provider provider : {Provider::openai, Provider::anthropic}) {
    auto c = client(config(provider));
    std::string echo = "Incorrect API key provided: " + key + ". Request headers: {\"Authorization\": \"Bearer " + key +
                       "\", \"x-api-key\": \"" + key + "\"}";
    server.push(401, json{{"error", {{"type", "authentication_error"}, {"message", echo}}}});
    ChatError error = error_of(*c, hello("x"));
    EXPECT_EQ(std::string(error.what()).find(key), std::string::npos) << error.what();
    EXPECT_EQ(error.body().find(key), std::string::npos) << error.body();
    EXPECT_NE(error.body().find("Bearer [redacted key]"), std::string::npos) << error.body();

    server.push(200, provider == Provider::openai ? scripted::openai_reply("your key is " + key)
                                                  : scripted::anthropic_reply("your key is " + key));
    ChatResponse reply = c->complete(hello("x"));
    EXPECT_EQ(reply.message.text, "your key is [redacted key]");
    EXPECT_EQ(reply.raw.dump().find(key), std::string::npos);
  }
}

}  // namespace
}  // namespace d2k::llm
