// The retry rules on their own: what each status and error body means, Retry-After in its three forms,
// and the bounds of the jittered backoff.
#include <gtest/gtest.h>

#include <random>

#include "llm/rate_limiter.hpp"
#include "llm/retry.hpp"

namespace d2k::llm {
namespace {

using Kind = ChatError::Kind;

TEST(Classify, StatusesAndErrorBodies) {
  EXPECT_EQ(classify(401, {}), Kind::auth);
  EXPECT_EQ(classify(403, {"permission_error", "", "no"}), Kind::auth);
  EXPECT_EQ(classify(402, {}), Kind::spend_limit);
  EXPECT_EQ(classify(429, {"insufficient_quota", "insufficient_quota", "quota"}), Kind::spend_limit);
  EXPECT_EQ(classify(429, {"", "", "You exceeded your current quota, please check your plan"}), Kind::spend_limit);
  EXPECT_EQ(classify(429, {"requests", "rate_limit_exceeded", "Rate limit reached for requests"}), Kind::rate_limited);
  EXPECT_EQ(classify(429, {"tokens", "rate_limit_exceeded", "too many tokens per min"}), Kind::rate_limited);
  EXPECT_EQ(classify(400, {"invalid_request_error", "context_length_exceeded", ""}), Kind::context_length);
  EXPECT_EQ(classify(400, {"", "", "Input is longer than the model's context window"}), Kind::context_length);
  EXPECT_EQ(classify(400, {"BadRequestError", "", "This model's maximum context length is 32768 tokens"}), Kind::context_length);
  EXPECT_EQ(classify(400, {"invalid_request_error", "", "tools.0.name: invalid"}), Kind::bad_request);
  EXPECT_EQ(classify(422, {}), Kind::bad_request);
  EXPECT_EQ(classify(408, {}), Kind::server);
  EXPECT_EQ(classify(500, {}), Kind::server);
  EXPECT_EQ(classify(503, {}), Kind::server);
  EXPECT_EQ(classify(529, {"overloaded_error", "", "Overloaded"}), Kind::server);
  EXPECT_EQ(classify(302, {}), Kind::bad_response);
  for (Kind kind : {Kind::rate_limited, Kind::server, Kind::network}) EXPECT_TRUE(retryable(kind)) << to_string(kind);
  for (Kind kind : {Kind::auth, Kind::spend_limit, Kind::context_length, Kind::bad_request, Kind::bad_response}) {
    EXPECT_FALSE(retryable(kind)) << to_string(kind);
  }
}

TEST(ProviderError, ReadsBothProvidersBodies) {
  ProviderError openai = provider_error(R"({"error": {"message": "m", "type": "t", "param": null, "code": "c"}})");
  EXPECT_EQ(openai.type, "t");
  EXPECT_EQ(openai.code, "c");
  EXPECT_EQ(openai.message, "m");
  ProviderError anthropic = provider_error(R"({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})");
  EXPECT_EQ(anthropic.type, "overloaded_error");
  EXPECT_EQ(anthropic.message, "Overloaded");
  ProviderError text = provider_error("<html>502 Bad Gateway</html>");
  EXPECT_EQ(text.message, "<html>502 Bad Gateway</html>");
  EXPECT_EQ(provider_error(R"({"error": "plain"})").message, "plain");
}

HttpResponse with(std::vector<std::pair<std::string, std::string>> headers) { return {429, std::move(headers), ""}; }

TEST(RetryAfter, SecondsMillisecondsAndDates) {
  double now = 1'767'225'600.0;  // Thu, 01 Jan 2026 00:00:00 GMT
  EXPECT_EQ(retry_after(with({}), now), std::nullopt);
  EXPECT_EQ(retry_after(with({{"retry-after", "2"}}), now), 2.0);
  EXPECT_EQ(retry_after(with({{"retry-after", "0.75"}}), now), 0.75);
  EXPECT_EQ(retry_after(with({{"retry-after", "1"}, {"retry-after-ms", "250"}}), now), 0.25);
  EXPECT_EQ(retry_after(with({{"retry-after", "Thu, 01 Jan 2026 00:01:30 GMT"}}), now), 90.0);
  EXPECT_EQ(retry_after(with({{"retry-after", "Wed, 31 Dec 2025 23:59:00 GMT"}}), now), 0.0);  // in the past
  EXPECT_EQ(retry_after(with({{"retry-after", "soon"}}), now), std::nullopt);
}

TEST(Backoff, FullJitterWithinTheDoublingCap) {
  std::mt19937_64 rng(std::random_device{}());
  RetryPolicy policy{10, 0.5, 5.0};
  for (int retry = 1; retry <= 8; ++retry) {
    double cap = std::min(5.0, 0.5 * (1 << (retry - 1)));
    double lowest = cap, highest = 0;
    for (int i = 0; i < 2000; ++i) {
      double delay = backoff(policy, retry, rng);
      ASSERT_GE(delay, 0);
      ASSERT_LE(delay, cap);
      lowest = std::min(lowest, delay);
      highest = std::max(highest, delay);
    }
    // Spread over the whole range, not a fixed delay.
    EXPECT_LT(lowest, cap * 0.05) << retry;
    EXPECT_GT(highest, cap * 0.95) << retry;
  }
  EXPECT_EQ(backoff({3, 0, 0}, 2, rng), 0);
}

TEST(RateLimiter, SharedPerEndpointAndTheSlowestRateWins) {
  EXPECT_EQ(rate_limiter_for("http://limiter.test/a", 0), nullptr);
  auto a = rate_limiter_for("http://limiter.test/a", 120);
  auto b = rate_limiter_for("http://limiter.test/a", 60);
  auto other = rate_limiter_for("http://limiter.test/b", 120);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, other);
  EXPECT_EQ(a->requests_per_minute(), 60);
  FakeClock clock;
  for (int i = 0; i < 4; ++i) a->acquire(clock);
  EXPECT_EQ(clock.sleeps(), (std::vector<double>{1.0, 1.0, 1.0}));
  clock.advance(0.25);  // a quarter of a token back: the next one waits the rest
  a->acquire(clock);
  EXPECT_EQ(clock.sleeps().back(), 0.75);
}

}  // namespace
}  // namespace d2k::llm
