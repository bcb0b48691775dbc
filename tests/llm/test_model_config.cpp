// models.toml: the shipped example loads; random valid configs read back field for field; every rule
// broken once gives an error naming the file, the line, the field path and the value.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "core/error.hpp"
#include "llm/model_config.hpp"

namespace d2k::llm {
namespace {

namespace fs = std::filesystem;

class ModelConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    file = fs::temp_directory_path() / fmt::format("d2k-test-llm-{}-{}", ::getpid(), counter++) / "models.toml";
    fs::create_directories(file.parent_path());
  }
  void TearDown() override { fs::remove_all(file.parent_path()); }

  void write(const std::string& text) { std::ofstream(file) << text; }

  // The message of the d2k::Error load_models throws for `text`.
  std::string error_for(const std::string& text) {
    write(text);
    try {
      load_models(file);
    } catch (const Error& error) {
      return error.what();
    }
    ADD_FAILURE() << "loaded:\n" << text;
    return "";
  }

  fs::path file;
};

const char* kValid = R"(
[models.m]
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "x"
prices = { input = 1, output = 2 }
)";

TEST_F(ModelConfigTest, LoadsTheShippedExample) {
  auto models = load_models(fs::path(D2K_ROOT_DIR) / "configs" / "models.example.toml");
  ASSERT_EQ(models.size(), 3u);
  const ModelConfig& gpt = models.at("gpt-5");
  EXPECT_EQ(gpt.name, "gpt-5");
  EXPECT_EQ(gpt.provider, Provider::openai);
  EXPECT_EQ(gpt.base_url, "https://api.openai.com/v1");
  EXPECT_EQ(gpt.api_key_env, "OPENAI_API_KEY");
  EXPECT_EQ(gpt.prices.cached_input, 0.125);
  EXPECT_FALSE(gpt.temperature.has_value());
  const ModelConfig& claude = models.at("claude-sonnet-4");
  EXPECT_EQ(claude.provider, Provider::anthropic);
  EXPECT_EQ(claude.temperature, 1.0);
  EXPECT_EQ(claude.requests_per_minute, 50);
  EXPECT_EQ(claude.retry.max_attempts, RetryPolicy{}.max_attempts);  // defaults where not given
  const ModelConfig& local = models.at("local");
  EXPECT_EQ(local.api_key_env, "");
  EXPECT_EQ(local.prices.cached_input, 0);
  EXPECT_EQ(claude.prices.cache_write, 3.75);
  EXPECT_EQ(gpt.prices.cache_write, gpt.prices.input);  // the default
  EXPECT_TRUE(gpt.prompt_cache);
  EXPECT_EQ(gpt.max_tokens_field, "max_completion_tokens");
  EXPECT_EQ(gpt.extra_body, (nlohmann::json{{"reasoning_effort", "medium"}}));
  EXPECT_EQ(claude.max_tokens_field, "max_tokens");
  EXPECT_EQ(claude.extra_body, nlohmann::json::object());
  EXPECT_EQ(local.retry.max_attempts, 3);
  EXPECT_EQ(local.retry.max_delay_s, RetryPolicy{}.max_delay_s);
}

TEST_F(ModelConfigTest, ReadsRandomConfigsBackFieldForField) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> unit(0, 1);
  for (int round = 0; round < 20; ++round) {
    std::vector<ModelConfig> written;
    std::string text;
    int count = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < count; ++i) {
      ModelConfig m;
      m.name = fmt::format("model_{}.v{}-{}", i, rng() % 10, rng() % 100);
      m.provider = rng() % 2 ? Provider::openai : Provider::anthropic;
      m.base_url = fmt::format("https://host{}.example/v{}", rng() % 100, rng() % 3);
      m.model = fmt::format("id-{}", rng());
      m.api_key_env = fmt::format("KEY_{}", rng() % 1000);
      m.max_tokens = 1 + static_cast<int>(rng() % 100000);
      m.temperature = std::round(unit(rng) * 2 * 1000) / 1000;
      m.top_p = std::round((0.001 + unit(rng) * 0.999) * 1000) / 1000;
      m.prices = {std::round(unit(rng) * 3000) / 100, std::round(unit(rng) * 300) / 100, std::round(unit(rng) * 9000) / 100,
                  std::round(unit(rng) * 4000) / 100};
      m.prompt_cache = rng() % 2 == 0;
      m.requests_per_minute = static_cast<double>(rng() % 1000);
      m.timeout_s = 1 + static_cast<double>(rng() % 1000);
      m.max_reply_bytes = 1024 + rng() % ((1u << 30) - 1024);
      m.retry.max_attempts = 1 + static_cast<int>(rng() % 10);
      m.retry.base_delay_s = std::round(unit(rng) * 500) / 100;
      m.retry.max_delay_s = m.retry.base_delay_s + static_cast<double>(rng() % 100);
      text += fmt::format(
          "[models.\"{}\"]\nprovider = \"{}\"\nbase_url = \"{}/\"\nmodel = \"{}\"\napi_key_env = \"{}\"\nmax_tokens = {}\n"
          "temperature = {}\ntop_p = {}\nprices = {{ input = {}, cached_input = {}, output = {}, cache_write = {} }}\n"
          "prompt_cache = {}\n"
          "requests_per_minute = {}\ntimeout_s = {}\nmax_reply_bytes = {}\n"
          "retry = {{ max_attempts = {}, base_delay_s = {}, max_delay_s = {} }}\n\n",
          m.name, to_string(m.provider), m.base_url, m.model, m.api_key_env, m.max_tokens, *m.temperature, *m.top_p,
          m.prices.input, m.prices.cached_input, m.prices.output, m.prices.cache_write, m.prompt_cache, m.requests_per_minute, m.timeout_s,
          m.max_reply_bytes, m.retry.max_attempts, m.retry.base_delay_s, m.retry.max_delay_s);
      written.push_back(m);
    }
    write(text);
    auto models = load_models(file);
    ASSERT_EQ(models.size(), written.size()) << text;
    for (const ModelConfig& m : written) {
      ASSERT_EQ(models.count(m.name), 1u) << m.name;
      const ModelConfig& got = models.at(m.name);
      EXPECT_EQ(got.provider, m.provider);
      EXPECT_EQ(got.base_url, m.base_url);  // the trailing '/' written is dropped
      EXPECT_EQ(got.model, m.model);
      EXPECT_EQ(got.api_key_env, m.api_key_env);
      EXPECT_EQ(got.max_tokens, m.max_tokens);
      EXPECT_EQ(got.temperature, m.temperature);
      EXPECT_EQ(got.top_p, m.top_p);
      EXPECT_EQ(got.prices.input, m.prices.input);
      EXPECT_EQ(got.prices.cached_input, m.prices.cached_input);
      EXPECT_EQ(got.prices.output, m.prices.output);
      EXPECT_EQ(got.prices.cache_write, m.prices.cache_write);
      EXPECT_EQ(got.prompt_cache, m.prompt_cache);
      EXPECT_EQ(got.requests_per_minute, m.requests_per_minute);
      EXPECT_EQ(got.timeout_s, m.timeout_s);
      EXPECT_EQ(got.max_reply_bytes, m.max_reply_bytes);
      EXPECT_EQ(got.retry.max_attempts, m.retry.max_attempts);
      EXPECT_EQ(got.retry.base_delay_s, m.retry.base_delay_s);
      EXPECT_EQ(got.retry.max_delay_s, m.retry.max_delay_s);
    }
  }
}

TEST_F(ModelConfigTest, ErrorsNameTheFileLineFieldAndValue) {
  const std::string base = kValid;
  auto expect = [&](const std::string& text, const std::string& tail) {
    std::string message = error_for(text);
    EXPECT_EQ(message, file.string() + ":" + tail) << text;
  };
  expect(base + "colour = \"red\"\n", "7: models.m.colour: unknown key (known keys: provider, base_url, model, "
                                      "api_key_env, max_tokens, temperature, top_p, prices, requests_per_minute, "
                                      "timeout_s, retry, prompt_cache, max_tokens_field, extra_body, max_reply_bytes)");
  std::string with_provider = kValid;
  with_provider.replace(with_provider.find("\"openai\""), 8, "\"gemini\"");
  expect(with_provider, "3: models.m.provider = \"gemini\": unknown provider (known: openai, anthropic)");
  expect(base + "temperature = 3.5\n", "7: models.m.temperature = 3.5: must be between 0 and 2");
  expect(base + "top_p = 0\n", "7: models.m.top_p = 0: must be in (0, 1]");
  expect(base + "max_tokens = 0\n", "7: models.m.max_tokens = 0: must be between 1 and 10000000");
  expect(base + "max_tokens = 1.5\n", "7: models.m.max_tokens = 1.5: must be an integer");
  expect(base + "timeout_s = -1\n", "7: models.m.timeout_s = -1: must be > 0");
  expect(base + "requests_per_minute = \"many\"\n", "7: models.m.requests_per_minute = \"many\": must be a number");
  expect(base + "api_key_env = \"MY KEY\"\n",
         "7: models.m.api_key_env = \"MY KEY\": must be an environment variable's name (letters, digits, _), or \"\" for no key");
  for (const char* pasted : {"sk-proj-Zq81vKx0aB", "AbCdEf0123456789XyZ12"}) {
    std::string message = error_for(base + "api_key_env = \"" + pasted + "\"\n");
    EXPECT_EQ(message, file.string() + ":7: models.m.api_key_env: looks like an API key, not the name of an environment "
                                       "variable (the value is not shown): put the key in an environment variable and "
                                       "give that variable's name here");
    EXPECT_EQ(message.find(pasted), std::string::npos);
  }
  expect(base + "retry = { max_attempts = 0 }\n", "7: models.m.retry.max_attempts = 0: must be between 1 and 100");
  expect(base + "retry = { base_delay_s = 5, max_delay_s = 2 }\n", "7: models.m.retry.max_delay_s = 2: must be >= base_delay_s (5)");
  expect(base + "max_reply_bytes = 1000\n", "7: models.m.max_reply_bytes = 1000: must be between 1024 and 1073741824");
  expect(base + "prompt_cache = 1\n", "7: models.m.prompt_cache = 1: must be true or false");
  expect(base + "max_tokens_field = \"max_new_tokens\"\n",
         "7: models.m.max_tokens_field = \"max_new_tokens\": must be \"max_tokens\" or \"max_completion_tokens\"");
  expect(base + "extra_body = { a = { when = 1979-05-27 } }\n",
         "7: models.m.extra_body.a.when = 1979-05-27: has no JSON form (dates and times are not allowed here)");
  expect(base + "extra_body = \"{}\"\n", "7: models.m.extra_body = \"{}\": must be a table");
  std::string anthropic = kValid;
  anthropic.replace(anthropic.find("\"openai\""), 8, "\"anthropic\"");
  expect(anthropic + "max_tokens_field = \"max_completion_tokens\"\n",
         "7: models.m.max_tokens_field = \"max_completion_tokens\": the Anthropic API takes only max_tokens");
  expect(base + "retry = { tries = 3 }\n",
         "7: models.m.retry.tries: unknown key (known keys: max_attempts, base_delay_s, max_delay_s)");
  std::string without_output = kValid;
  without_output.replace(without_output.find(", output = 2"), 12, "");
  expect(without_output, "6: models.m.prices: missing required key 'output'");
  std::string price_key = kValid;
  price_key.replace(price_key.find("output = 2"), 10, "output = 2, write = 3");
  expect(price_key, "6: models.m.prices.write: unknown key (known keys: input, cached_input, output, cache_write)");
  std::string negative_price = kValid;
  negative_price.replace(negative_price.find("input = 1"), 9, "input = -0.5");
  expect(negative_price, "6: models.m.prices.input = -0.5: must be >= 0");
  std::string without_model = kValid;
  without_model.replace(without_model.find("model = \"x\"\n"), 12, "");
  expect(without_model, "2: models.m: missing required key 'model'");
  std::string bad_url = kValid;
  bad_url.replace(bad_url.find("http://"), 7, "");
  expect(bad_url, "4: models.m.base_url = \"127.0.0.1:9/v1\": must start with http:// or https://");
  expect(std::string("[model.m]\nprovider = \"openai\"\n"), "1: model: unknown key (known keys: models)");
  expect(std::string("title = \"x\"\n"), "1: title: unknown key (known keys: models)");
  expect(std::string("models = 3\n"), "1: models = 3: must be a table");
  expect(std::string("[models]\n"), "1: models: defines no model");
  expect(std::string("[models.\"a b\"]\n"), "1: models.a b: a model name is letters, digits, '_', '-' and '.'");
}

TEST_F(ModelConfigTest, InvalidTomlAndMissingFilesNameTheFile) {
  EXPECT_EQ(error_for("[models.m\n").rfind(file.string() + ":1:", 0), 0u);
  fs::path missing = file.parent_path() / "nope.toml";
  try {
    load_models(missing);
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()), missing.string() + ": no such model config file");
  }
}

TEST(Cost, PricesUncachedCachedAndOutputTokensPerMillion) {
  Usage usage;
  usage.input_tokens = 1'200'000;
  usage.cached_input_tokens = 200'000;
  usage.output_tokens = 50'000;
  EXPECT_DOUBLE_EQ(cost_usd(usage, {2.0, 0.5, 8.0, 2.5}), 1.0 * 2.0 + 0.2 * 0.5 + 0.05 * 8.0);
  usage.cache_write_input_tokens = 400'000;
  EXPECT_DOUBLE_EQ(cost_usd(usage, {2.0, 0.5, 8.0, 2.5}), 0.6 * 2.0 + 0.2 * 0.5 + 0.4 * 2.5 + 0.05 * 8.0);
  EXPECT_EQ(cost_usd(Usage{}, {2.0, 0.5, 8.0}), 0.0);
}

}  // namespace
}  // namespace d2k::llm
