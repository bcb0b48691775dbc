// Shared by the llm tests: a scripted endpoint on loopback, a model config pointing at it, a fake clock,
// and random text that exercises JSON escaping (quotes, backslashes, newlines, non-ASCII).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>

#include "llm/chat.hpp"
#include "llm/model_config.hpp"
#include "scripted_server.hpp"

namespace d2k::llm {

inline std::string random_text(std::mt19937_64& rng, int min_len = 1, int max_len = 60) {
  static const std::string pieces[] = {"a", "b", "z", "Q", "0", "7", " ", "\"", "\\", "\n", "\t", "{", "}", "é", "λ",
                                       "→", "kernel", "__global__", "<tag>", "'", "%s", "\u00a0"};
  int length = std::uniform_int_distribution<int>(min_len, max_len)(rng);
  std::string out;
  for (int i = 0; i < length; ++i) out += pieces[rng() % std::size(pieces)];
  return out;
}

class LlmTest : public ::testing::Test {
 protected:
  static constexpr const char* kKeyEnv = "D2K_TEST_LLM_KEY";

  void SetUp() override {
    rng.seed(std::random_device{}());
    key = "sk-" + std::to_string(rng());
    ::setenv(kKeyEnv, key.c_str(), 1);
    server.start();
    clock = std::make_shared<FakeClock>();
  }

  void TearDown() override {
    server.stop();
    EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  }

  ModelConfig config(Provider provider) {
    ModelConfig config;
    config.name = "scripted";
    config.provider = provider;
    config.base_url = server.url() + "/v1";
    config.model = "model-" + std::to_string(rng() % 1000);
    config.api_key_env = kKeyEnv;
    config.max_tokens = 100 + static_cast<int>(rng() % 5000);
    config.temperature = 0.25;
    config.prices = {3.0, 0.3, 15.0, 3.75};
    config.timeout_s = 10;
    config.retry = {4, 0.5, 3.0};
    return config;
  }

  std::unique_ptr<ChatClient> client(const ModelConfig& config) {
    return make_client(config, ClientOptions{clock, rng()});
  }

  // The error complete() throws; fails the test when it returns.
  ChatError error_of(ChatClient& client, const ChatRequest& request) {
    try {
      client.complete(request);
    } catch (const ChatError& error) {
      return error;
    }
    ADD_FAILURE() << "complete() returned";
    return ChatError(ChatError::Kind::bad_response, -1, "returned");
  }

  std::mt19937_64 rng;
  std::string key;
  scripted::Server server;
  std::shared_ptr<FakeClock> clock;
};

inline ChatRequest hello(const std::string& text) {
  ChatRequest request;
  request.messages.push_back({Role::user, text, {}, "", false});
  return request;
}

}  // namespace d2k::llm
