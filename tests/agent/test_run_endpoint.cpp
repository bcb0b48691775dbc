// The agent loop against a hostile or broken endpoint, through the real HTTP clients and the scripted
// server (issue 18): garbled replies, missing usage, bad tool-call ids, reasoning to send back, a key
// echoed in an error. The tools used change nothing, so no solution is built.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <sstream>
#include <utility>

#include "agent/records.hpp"
#include "agent/run.hpp"
#include "agent/transcript.hpp"
#include "agent/workspace.hpp"
#include "core/task_loader.hpp"
#include "llm/model_config.hpp"
#include "scripted_replies.hpp"
#include "scripted_server.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace d2k;
using namespace d2k::agent;

namespace {

const fs::path kRoot = D2K_ROOT_DIR;
constexpr const char* kKeyEnv = "D2K_TEST_ENDPOINT_KEY";
constexpr const char* kKey = "sk-test-Zq81vKx0TopSecret9f3";

const Task& task() {
  static const auto all = load_tasks(kRoot / "tasks");
  for (const auto& t : all)
    if (t.name == "moe/topk_softmax") return t;
  throw std::runtime_error("no task");
}

// A run of at most `turns` turns on the cpu device whose model is the scripted server.
struct Fixture {
  fs::path dir;
  scripted::Server server;
  llm::ModelConfig model;
  std::unique_ptr<llm::ChatClient> client;
  std::ostringstream log;
  RunSetup setup;

  Fixture(const std::string& name, llm::Provider provider, int turns) {
    dir = fs::temp_directory_path() / fmt::format("d2k-agent-endpoint-{}-{}", name, ::getpid());
    fs::remove_all(dir);
    ::setenv(kKeyEnv, kKey, 1);
    server.start();
    model.name = "scripted";
    model.provider = provider;
    model.base_url = server.url() + "/v1";
    model.model = "m";
    model.api_key_env = kKeyEnv;
    model.prices = {1.0, 0.1, 4.0, 1.0};
    model.timeout_s = 10;
    model.retry = {1, 0, 0};
    client = llm::make_client(model);
    setup.task = &task();
    setup.environment.device = Device::cpu;
    setup.environment.root = kRoot;
    setup.environment.build_cache = fs::temp_directory_path() / fmt::format("d2k-agent-builds-{}", ::getuid());
    setup.environment.scratch_dir = dir / "scratch";
    setup.environment.worker = D2K_WORKER_PATH;
    fs::create_directories(setup.environment.scratch_dir);
    setup.settings.task = task().name;
    setup.settings.model = "scripted";
    setup.settings.device = Device::cpu;
    setup.settings.seed = 7;
    setup.settings.budget.max_turns = turns;
    setup.client = client.get();
    setup.cost_usd = [prices = model.prices](const llm::Usage& usage) { return llm::cost_usd(usage, prices); };
    setup.run_dir = dir / "run";
    setup.log = &log;
  }
  ~Fixture() {
    server.stop();
    fs::remove_all(dir);
  }
  void reply(const json& body) { server.push(200, body); }
  std::vector<json> records() const { return read_transcript(setup.run_dir / "transcript.jsonl").records; }
  std::vector<json> of_type(const std::string& type) const {
    std::vector<json> out;
    for (const auto& r : records())
      if (r.at("type") == type) out.push_back(r);
    return out;
  }
};

scripted::Call list_files(const std::string& id) { return {id, "list_files", "{}"}; }

std::string with_lone_surrogate() {
  std::string body = scripted::openai_reply("TEXT", {list_files("x")}).dump();
  return body.replace(body.find("TEXT"), 4, "\\udc00");
}

}  // namespace

// Issue 18 items 17 and 9: a garbled reply and one with impossible usage are one format error each;
// the run goes on with the same request, and a reply without usage is counted by estimate.
TEST(AgentRunEndpoint, UnreadableRepliesAreFormatErrorsAndTheSameRequestGoesAgain) {
  Fixture f("unreadable", llm::Provider::openai, 4);
  json no_usage = scripted::openai_reply("", {list_files("a")});
  no_usage.erase("usage");
  json negative = scripted::openai_reply("", {list_files("b")});
  negative["usage"]["completion_tokens"] = -3;
  f.reply(no_usage);
  f.reply(json(with_lone_surrogate()));
  f.reply(negative);
  f.reply(scripted::openai_reply("", {list_files("c")}));

  const auto result = start_run(f.setup);

  EXPECT_EQ(result.status, RunStatus::budget) << result.reason;
  const auto received = f.server.received();
  ASSERT_EQ(received.size(), 4u);
  EXPECT_EQ(received[2].body, received[1].body) << "a garbled reply must not change the conversation";
  EXPECT_EQ(received[3].body, received[1].body);
  const auto responses = f.of_type("response");
  ASSERT_EQ(responses.size(), 4u);
  EXPECT_FALSE(responses[0].contains("format_error"));
  EXPECT_TRUE(responses[0].at("usage").at("estimated").get<bool>());
  EXPECT_GT(responses[0].at("usage").at("input_tokens").get<int64_t>(), static_cast<int64_t>(received[0].body.size() / 4) - 1);
  EXPECT_GT(responses[0].at("cost_usd").get<double>(), 0);
  EXPECT_NE(responses[1].at("format_error").get<std::string>().find("surrogate"), std::string::npos);
  EXPECT_NE(responses[2].at("format_error").get<std::string>().find("usage.completion_tokens = -3"), std::string::npos);
  EXPECT_TRUE(responses[2].at("usage").at("estimated").get<bool>());
  EXPECT_GE(responses[2].at("usage").at("output_tokens").get<int64_t>(), 0);
  std::vector<int> streaks;
  for (const auto& b : f.of_type("budget")) streaks.push_back(b.at("format_errors_in_a_row").get<int>());
  EXPECT_EQ(streaks, (std::vector<int>{0, 1, 2, 0}));
  EXPECT_TRUE(f.of_type("user").empty()) << "no reminder for a reply the model never saw";
  EXPECT_EQ(f.of_type("tool_result").size(), 2u);
  EXPECT_EQ(f.of_type("final").at(0).at("used").at("estimated_responses"), 3);
  const std::string log = f.log.str();
  EXPECT_NE(log.find("warning: turn 1: the endpoint sent no usable token counts"), std::string::npos) << log;
  EXPECT_EQ(log.find("warning", log.find("warning") + 1), std::string::npos) << "warned more than once:\n" << log;
}

TEST(AgentRunEndpoint, FiveUnreadableRepliesInARowEndTheRunAsFormatErrors) {
  Fixture f("garbage", llm::Provider::anthropic, 20);
  for (int i = 0; i < 5; ++i) f.reply(json(std::string("{\"content\": [")));
  const auto result = start_run(f.setup);
  EXPECT_EQ(result.status, RunStatus::format_errors) << result.reason;
  EXPECT_EQ(f.server.received().size(), 5u);
}

// Before, a reply without usage cost 0 tokens and the token budget never tripped.
TEST(AgentRunEndpoint, RepliesWithoutUsageStillTripTheTokenBudget) {
  Fixture f("estimate", llm::Provider::anthropic, 20);
  f.setup.settings.budget.max_tokens_total = 1000;
  json no_usage = scripted::anthropic_reply("", {list_files("toolu_1")});
  no_usage.erase("usage");
  f.reply(no_usage);
  const auto result = start_run(f.setup);
  EXPECT_EQ(result.status, RunStatus::budget) << result.reason;
  EXPECT_NE(result.reason.find("tokens:"), std::string::npos) << result.reason;
  EXPECT_EQ(f.server.received().size(), 1u);
}

// A crash right after a garbled reply's record: the resumed run counts it as before.
TEST(AgentRunEndpoint, ResumeRestoresAnUnreadableTurn) {
  Fixture f("resume", llm::Provider::openai, 3);
  f.reply(scripted::openai_reply("", {list_files("a")}));
  f.reply(json(with_lone_surrogate()));
  f.reply(scripted::openai_reply("", {list_files("b")}));
  set_crash_hook([](const char* point) { throw std::string(point); });
  set_crash_spec("response:2");
  EXPECT_THROW(start_run(f.setup), std::string);
  set_crash_spec("");
  set_crash_hook(nullptr);
  const auto result = resume_run(f.setup);
  EXPECT_EQ(result.status, RunStatus::budget) << result.reason;
  std::vector<int> streaks;
  for (const auto& b : f.of_type("budget")) streaks.push_back(b.at("format_errors_in_a_row").get<int>());
  EXPECT_EQ(streaks, (std::vector<int>{0, 1, 0}));
  const auto received = f.server.received();
  ASSERT_EQ(received.size(), 3u);
  EXPECT_EQ(received[2].body, received[1].body);
}

// Issue 18 item 10: empty and repeated ids are replaced, recorded, and the results answer the new ids.
TEST(AgentRunEndpoint, EmptyOrRepeatedToolCallIdsAreReplacedAndRecorded) {
  Fixture f("ids", llm::Provider::openai, 3);
  f.reply(scripted::openai_reply("", {list_files(""), list_files("")}));
  f.reply(scripted::openai_reply("", {list_files("d2k_call_1")}));
  f.reply(scripted::openai_reply("", {list_files("fine")}));
  const auto result = start_run(f.setup);
  EXPECT_EQ(result.status, RunStatus::budget) << result.reason;
  const auto responses = f.of_type("response");
  ASSERT_EQ(responses.size(), 3u);
  EXPECT_EQ(responses[0].at("tool_calls")[0].at("id"), "d2k_call_1");
  EXPECT_EQ(responses[0].at("tool_calls")[0].at("original_id"), "");
  EXPECT_EQ(responses[0].at("tool_calls")[1].at("id"), "d2k_call_2");
  EXPECT_EQ(responses[1].at("tool_calls")[0].at("id"), "d2k_call_3");
  EXPECT_EQ(responses[1].at("tool_calls")[0].at("original_id"), "d2k_call_1");
  EXPECT_FALSE(responses[2].at("tool_calls")[0].contains("original_id"));
  std::vector<std::string> results;
  for (const auto& r : f.of_type("tool_result")) results.push_back(r.at("id"));
  EXPECT_EQ(results, (std::vector<std::string>{"d2k_call_1", "d2k_call_2", "d2k_call_3", "fine"}));
  const json last = f.server.received().back().json();
  std::vector<std::string> answered;
  for (const auto& m : last.at("messages"))
    if (m.at("role") == "tool") answered.push_back(m.at("tool_call_id"));
  EXPECT_EQ(answered, (std::vector<std::string>{"d2k_call_1", "d2k_call_2", "d2k_call_3"}));
}

// Issue 18 item 6: thinking blocks are recorded and sent back, by a resumed run too.
TEST(AgentRunEndpoint, ThinkingIsRecordedAndSentBackAfterAResume) {
  Fixture f("thinking", llm::Provider::anthropic, 2);
  f.model.prompt_cache = false;
  f.client = llm::make_client(f.model);
  f.setup.client = f.client.get();
  const json thinking = {{"type", "thinking"}, {"thinking", "List the files first."}, {"signature", "c2lnbmF0dXJl"}};
  const json redacted = {{"type", "redacted_thinking"}, {"data", "ZW5jcnlwdGVk"}};
  json first = scripted::anthropic_reply("", {list_files("toolu_1")});
  first["content"].insert(first["content"].begin(), {thinking, redacted});
  f.reply(first);
  f.reply(scripted::anthropic_reply("", {list_files("toolu_2")}));
  set_crash_hook([](const char* point) { throw std::string(point); });
  set_crash_spec("turn:1");
  EXPECT_THROW(start_run(f.setup), std::string);
  set_crash_spec("");
  set_crash_hook(nullptr);
  EXPECT_EQ(resume_run(f.setup).status, RunStatus::budget);

  const auto reasoning = f.of_type("response").at(0).at("reasoning");
  EXPECT_EQ(reasoning, json::parse(R"([{"type": "thinking", "text": "List the files first.", "signature": "c2lnbmF0dXJl"},
                                        {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}])"));
  const auto received = f.server.received();
  ASSERT_EQ(received.size(), 2u);
  const json assistant = received[1].json().at("messages").at(1);
  ASSERT_EQ(assistant.at("role"), "assistant");
  EXPECT_EQ(assistant.at("content").at(0), thinking);
  EXPECT_EQ(assistant.at("content").at(1), redacted);
  EXPECT_EQ(assistant.at("content").at(2).at("type"), "tool_use");
}

// Issue 18 item 12: a key the endpoint echoes reaches no file of the run and not the progress.
TEST(AgentRunEndpoint, AnEchoedKeyIsInNoFileAndNotInTheProgress) {
  Fixture f("key", llm::Provider::openai, 5);
  json echo_reply = scripted::openai_reply("I was sent " + std::string(kKey), {list_files("a")});
  f.reply(echo_reply);
  f.server.push(401, json{{"error", {{"message", "Incorrect API key provided: Bearer " + std::string(kKey)},
                                     {"type", "invalid_request_error"}}}});
  const auto result = start_run(f.setup);
  EXPECT_EQ(result.status, RunStatus::api_error);
  EXPECT_EQ(result.reason.find(kKey), std::string::npos) << result.reason;
  EXPECT_EQ(f.log.str().find(kKey), std::string::npos) << f.log.str();
  std::size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(f.setup.run_dir)) {
    if (!entry.is_regular_file()) continue;
    ++files;
    EXPECT_EQ(read_whole_file(entry.path())->find(kKey), std::string::npos) << entry.path();
  }
  EXPECT_GE(files, 3u);  // run.json, transcript.jsonl, result.json at least
  EXPECT_NE(read_whole_file(f.setup.run_dir / "transcript.jsonl")->find("Bearer [redacted key]"), std::string::npos);
}

// Issue 18's chaos suite: whole runs against an endpoint that answers each turn, at random (seeded), with
// a usable reply or one of the ways replies go wrong: garbled JSON, a lone surrogate, the wrong shape,
// missing or impossible usage, a body over the cap, empty or repeated call ids, no tool call, the key
// echoed back, a streamed body, a server error that ends the run. Every run must end with a typed status
// (never harness_error), keep every exchange in a transcript that reads back, and write the key nowhere.
namespace {

// One turn's reply: the step to push and what it is, for the failure message.
std::pair<scripted::Step, std::string> chaos_step(std::mt19937& random, int turn) {
  scripted::Step step;
  const auto reply = [&](const json& body) { step.body = body.dump(); };
  const std::string id = fmt::format("call_{}", turn);
  switch (std::uniform_int_distribution<int>(0, 11)(random)) {
    case 0: reply(scripted::openai_reply("", {list_files(id)})); return {step, "a usable reply"};
    case 1: reply(scripted::openai_reply("", {list_files(id), list_files(id)})); return {step, "a repeated call id"};
    case 2: reply(scripted::openai_reply("", {list_files("")})); return {step, "an empty call id"};
    case 3: step.body = with_lone_surrogate(); return {step, "a lone surrogate"};
    case 4: step.body = R"({"choices": [{"message": {"role": "assist)"; return {step, "a cut-off body"};
    case 5: reply(json{{"error", {{"message", "overloaded"}}}}); return {step, "an error body with status 200"};
    case 6: {
      json body = scripted::openai_reply("", {list_files(id)});
      body.erase("usage");
      reply(body);
      return {step, "no usage"};
    }
    case 7: {
      json body = scripted::openai_reply("", {list_files(id)});
      body["usage"]["prompt_tokens"] = -7;
      reply(body);
      return {step, "negative usage"};
    }
    case 8: reply(scripted::openai_reply(std::string(96 << 10, 'x'), {list_files(id)})); return {step, "a body over the cap"};
    case 9: reply(scripted::openai_reply("no tools this time")); return {step, "no tool call"};
    case 10: reply(scripted::openai_reply(std::string("the key is ") + kKey, {list_files(id)})); return {step, "the key echoed"};
    default:
      if (std::uniform_int_distribution<int>(0, 3)(random) == 0) {
        step.status = 500;
        reply(json{{"error", {{"message", std::string("internal error for Bearer ") + kKey}}}});
        return {step, "a server error echoing the key"};
      }
      step.chunked = true;
      reply(scripted::openai_reply("", {list_files(id)}));
      return {step, "a streamed usable reply"};
  }
}

}  // namespace

TEST(AgentRunEndpoint, ChaosRunsEndTypedLoseNothingAndNeverStoreTheKey) {
  constexpr int kSeeds = 12, kTurns = 10;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    Fixture f(fmt::format("chaos-{}", seed), llm::Provider::openai, kTurns);
    f.model.max_reply_bytes = 64 << 10;
    f.client = llm::make_client(f.model);
    f.setup.client = f.client.get();
    std::mt19937 random(static_cast<unsigned>(seed));
    std::string script;
    for (int turn = 1; turn <= kTurns + 2; ++turn) {
      auto [step, what] = chaos_step(random, turn);
      script += fmt::format(" {}:{}", turn, what);
      f.server.push(std::move(step));
    }
    SCOPED_TRACE(fmt::format("seed {}, replies{}", seed, script));

    const auto result = start_run(f.setup);

    std::cout << "seed " << seed << ": " << name_of(result.status) << " after " << f.server.received().size()
              << " requests;" << script << "\n";
    EXPECT_TRUE(result.status == RunStatus::budget || result.status == RunStatus::format_errors ||
                result.status == RunStatus::api_error)
        << name_of(result.status) << ": " << result.reason;
    // Every exchange is in the transcript, which reads back whole: a response record per reply the run
    // took (a server error ends the run without one), then its end.
    const auto received = f.server.received().size();
    const auto responses = f.of_type("response").size();
    EXPECT_EQ(responses + (result.status == RunStatus::api_error ? 1 : 0), received);
    EXPECT_EQ(f.of_type("end").size(), 1u);
    EXPECT_EQ(f.log.str().find(kKey), std::string::npos);
    for (const auto& entry : fs::recursive_directory_iterator(f.setup.run_dir)) {
      if (!entry.is_regular_file()) continue;
      EXPECT_EQ(read_whole_file(entry.path())->find(kKey), std::string::npos) << entry.path();
    }
  }
}
