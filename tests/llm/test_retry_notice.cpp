// Issue 18, item 13: a client says which attempt failed, why and how long it waits before it retries,
// so that a console is not silent through a minute of retries.
#include <gtest/gtest.h>

#include "llm_fixture.hpp"

namespace d2k::llm {
namespace {

using nlohmann::json;

class RetryNotices : public LlmTest {};

TEST_F(RetryNotices, EveryRetryIsAnnouncedWithItsAttemptReasonAndWait) {
  ModelConfig model = config(Provider::openai);
  server.push(429, json{{"error", {{"message", "Rate limit reached"}, {"type", "requests"}, {"code", "rate_limit_exceeded"}}}},
              {{"Retry-After", "2"}});
  server.push(503, json{{"error", {{"message", "busy"}, {"type", "server_error"}}}}, {{"Retry-After", "1"}});
  server.push(200, json{{"choices", json::array({{{"index", 0}, {"message", {{"role", "assistant"}, {"content", "ok"}}},
                                                   {"finish_reason", "stop"}}})},
                        {"usage", {{"prompt_tokens", 1}, {"completion_tokens", 1}}}});
  std::vector<RetryNotice> notices;
  ClientOptions options{clock, rng(), [&](const RetryNotice& n) { notices.push_back(n); }};
  auto c = make_client(model, options);
  c->complete(hello("x"));
  ASSERT_EQ(notices.size(), 2u);
  EXPECT_EQ(notices[0].attempt, 1);
  EXPECT_EQ(notices[0].max_attempts, model.retry.max_attempts);
  EXPECT_EQ(notices[0].wait_seconds, 2.0);
  EXPECT_NE(notices[0].why.find("HTTP 429 rate_limited: Rate limit reached"), std::string::npos) << notices[0].why;
  EXPECT_EQ(notices[1].attempt, 2);
  EXPECT_EQ(notices[1].wait_seconds, 1.0);
  EXPECT_NE(notices[1].why.find("HTTP 503 server"), std::string::npos) << notices[1].why;
}

}  // namespace
}  // namespace d2k::llm
