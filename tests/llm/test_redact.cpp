#include <gtest/gtest.h>

#include "llm/redact.hpp"

namespace d2k::llm {
namespace {

TEST(RedactKey, EveryFormOfTheKeyIsReplaced) {
  const std::string key = "sk-ab/cd+ef==\"q";
  const std::string text = "raw " + key + " json sk-ab/cd+ef==\\\"q escaped-slash sk-ab\\/cd+ef==\\\"q url sk-ab%2Fcd%2Bef%3D%3D%22q"
                           " lower sk-ab%2fcd%2bef%3d%3d%22q end";
  EXPECT_EQ(redact_key(text, key), "raw [redacted key] json [redacted key] escaped-slash [redacted key] url [redacted key]"
                                   " lower [redacted key] end");
  EXPECT_EQ(redact_key("EMPTY is not a secret", "EMPTY"), "EMPTY is not a secret");
  EXPECT_EQ(redact_key("", key), "");
}

TEST(LooksLikeKey, KeysAreToldFromVariableNames) {
  for (const char* key : {"sk-proj-abc123", "sk-ant-api03-xyz", "gsk_0123abc", "AIzaSyD0123", "hf_abcdef", "xai-12ab",
                          "3f9a0c1d2e4b5a6978c0d1e2f3a4b5c6", "AbCdEf0123456789XyZ12"}) {
    EXPECT_TRUE(looks_like_key(key)) << key;
  }
  for (const char* name : {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_KEY_2", "key", "DEEPSEEK_API_KEY_FOR_PROJECT_2026",
                           "TOGETHERAPIKEY"}) {
    EXPECT_FALSE(looks_like_key(name)) << name;
  }
}

}  // namespace
}  // namespace d2k::llm
