// Whole judgements against the scripted endpoint over real HTTP: samples in different orders mapped back
// to ids, the one retry, unusable replies, budgets, resume without asking again, blindness, the audit.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "core/error.hpp"
#include "judge/judge.hpp"
#include "judge/order.hpp"
#include "judge_fixture.hpp"
#include "llm/model_config.hpp"
#include "scripted_replies.hpp"
#include "scripted_server.hpp"

namespace d2k::judge {
namespace {

using namespace testing;
using nlohmann::json;

class JudgeRun : public ::testing::Test {
 protected:
  void SetUp() override {
    server.start();
    task = tiny_task();
    // A run folder whose name carries the agent's condition and model: neither may reach the judge.
    run_dir = dir.path() / "test_tiny-L1+L2-agentmodel-q7-20261130T021500Z-3f2a";
    dir.write(run_dir.filename().string() + "/run.json", R"({"task": "test/tiny", "model": "agentmodel-q7", "condition": "L1+L2"})");
    dir.write(run_dir.filename().string() + "/submitted/design.md", kDesign);
    config.name = "judge-secret-name";
    config.provider = llm::Provider::openai;
    config.base_url = server.url() + "/v1";
    config.model = "judge-model-id";
    config.prices = {2.0, 1.0, 10.0, 2.0};
    config.timeout_s = 10;
    config.retry = {2, 0.01, 0.05};
    client = llm::make_client(config);
  }
  void TearDown() override {
    server.stop();
    EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  }

  JudgeSetup setup(int samples, Subject subject) {
    JudgeSetup s;
    s.task = &task;
    s.subject = std::move(subject);
    s.client = client.get();
    s.cost_usd = [this](const llm::Usage& u) { return llm::cost_usd(u, config.prices); };
    s.model = config.name;
    s.model_entry = {{"model", config.model}};
    s.samples = samples;
    s.seed = 11;
    s.out = dir.path() / "out" / "design-judge.json";
    return s;
  }
  JudgeSetup design_setup(int samples) { return setup(samples, load_design(run_dir)); }

  void push(const std::string& text) { server.push(200, scripted::openai_reply(text, {}, {100, 0, 20})); }

  // The user message of request i, and its "The item ids:" line.
  std::string user_of(std::size_t i) {
    const auto body = server.received().at(i).json();
    std::string text;
    for (const auto& m : body["messages"])
      if (m["role"] == "user") text += m["content"].get<std::string>();
    return text;
  }
  std::vector<std::string> order_of(std::size_t i) {
    std::smatch m;
    const auto text = user_of(i);
    EXPECT_TRUE(std::regex_search(text, m, std::regex("The item ids: (.+)\\.\\n")));
    std::vector<std::string> ids;
    std::string list = m[1];
    for (std::size_t at = 0; at < list.size();) {
      const auto comma = list.find(", ", at);
      ids.push_back(list.substr(at, comma - at));
      at = comma == std::string::npos ? list.size() : comma + 2;
    }
    return ids;
  }

  std::vector<std::pair<std::string, Item>> all_met() {
    // Deliberately in an order of its own: verdicts are keyed by id, never by position.
    return {{"L3.2", {"met", {"reduced with warp shuffles"}}},  {"L3.1", {"met", {"All loads are sixteen-byte vectors"}}},
            {"L2.2", {"met", {"read-only cache path"}}},        {"L2.1", {"met", {"keeps it in registers"}}},
            {"L1.2", {"met", {"rounded to bf16 exactly once"}}}, {"L1.1", {"met", {"reads every row once"}}}};
  }
  std::vector<std::pair<std::string, Item>> with(std::vector<std::pair<std::string, Item>> items, const std::string& id, Item item) {
    for (auto& [key, value] : items)
      if (key == id) value = item;
    return items;
  }

  TempDir dir;
  std::filesystem::path run_dir;
  scripted::Server server;
  Task task;
  llm::ModelConfig config;
  std::unique_ptr<llm::ChatClient> client;
};

TEST_F(JudgeRun, SamplesSeeDifferentOrdersAndTheirVerdictsMapBackToIds) {
  push(reply(all_met()));
  push(reply(with(all_met(), "L3.2", {"not_met", {}})));
  push(reply(with(all_met(), "L2.1", {"partly_met", {"keeps it in registers"}})));
  const auto j = run_judge(design_setup(3));
  ASSERT_TRUE(j.complete);
  ASSERT_EQ(server.received().size(), 3u);
  const auto o0 = order_of(0), o1 = order_of(1), o2 = order_of(2);
  EXPECT_NE(o0, o1);
  EXPECT_NE(o1, o2);
  EXPECT_NE(o0, o2);
  EXPECT_EQ(j.samples[1].order, o1);
  // Each item's heading comes in the order the ids line gives.
  const auto user = user_of(1);
  for (std::size_t k = 1; k < o1.size(); ++k) EXPECT_LT(user.find("## " + o1[k - 1] + " "), user.find("## " + o1[k] + " "));
  EXPECT_EQ(j.score.samples, (std::vector<double>{100.0, 100.0 * 5 / 6, 100.0 * 5.5 / 6}));
  EXPECT_NEAR(j.score.score, (100.0 + 500.0 / 6 + 550.0 / 6) / 3, 1e-9);
  const auto& items = j.document["items"];
  EXPECT_EQ(items[5]["id"], "L3.2");
  EXPECT_EQ(items[5]["verdicts"], json({"met", "not_met", "met"}));
  EXPECT_EQ(items[2]["verdicts"], json({"met", "met", "partly_met"}));
  EXPECT_NEAR(j.document["items"][5]["agreement"].get<double>(), 1.0 / 3, 1e-12);
  EXPECT_EQ(j.usage.requests, 3);
  EXPECT_EQ(j.usage.input_tokens, 300);
  EXPECT_NEAR(j.usage.cost_usd, 3 * (100 * 2.0 + 20 * 10.0) / 1e6, 1e-12);
  // The document is on disk, with the judge and the prompt's hash recorded.
  std::ifstream file(dir.path() / "out" / "design-judge.json");
  const auto doc = json::parse(file);
  EXPECT_EQ(doc["judge"]["model"], "judge-secret-name");
  EXPECT_EQ(doc["judge"]["template_sha256"], template_sha256(Kind::design));
  EXPECT_EQ(doc["samples"][0]["prompt_sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(doc["judge"]["seed"], 11);
}

TEST_F(JudgeRun, NoPromptNamesTheConditionTheModelOrTheRunFolder) {
  push(reply(with(all_met(), "L2.1", {"met", {"made up words here"}})));
  push(reply({{"L2.1", {"met", {"keeps it in registers"}}}}));
  push(reply(all_met()));
  run_judge(design_setup(2));
  ASSERT_EQ(server.received().size(), 3u);  // the first sample asked again once
  for (const auto& request : server.received()) {
    for (const char* secret : {"L1+L2", "agentmodel", "judge-secret-name", "condition", "3f2a"})
      EXPECT_EQ(request.body.find(secret), std::string::npos) << secret << " in request " << request.index;
    EXPECT_EQ(request.body.find(dir.path().string()), std::string::npos);
  }
}

TEST_F(JudgeRun, AFabricatedQuoteIsAskedAgainOnceThenCountsNotMetAndFlagged) {
  push(reply(with(all_met(), "L2.1", {"met", {"keeps the row in shared memory"}})));
  push(reply({{"L2.1", {"met", {"keeps the row in TMEM"}}}}));
  const auto j = run_judge(design_setup(1));
  ASSERT_EQ(server.received().size(), 2u);
  const auto retry = user_of(1);
  EXPECT_NE(retry.find("with verdicts for these items only: L2.1."), std::string::npos) << retry;
  EXPECT_NE(retry.find("the quote \"keeps the row in shared memory\" is not in the design"), std::string::npos);
  const auto body = server.received()[1].json();
  EXPECT_EQ(body["messages"][2]["role"], "assistant");  // system, the prompt, the first reply, the retry message
  EXPECT_EQ(body["messages"].size(), 4u);
  const auto& l21 = j.samples[0].verdicts[2];
  EXPECT_EQ(l21.id, "L2.1");
  EXPECT_EQ(l21.verdict, Verdict::not_met);
  ASSERT_EQ(l21.flags.size(), 1u);
  EXPECT_EQ(l21.flags[0], "fabricated_quote: the quote \"keeps the row in TMEM\" is not in the design");
  // L2.1 not met: L2.2 and L3.1 depend on it down the chain.
  EXPECT_DOUBLE_EQ(j.score.score, 100.0 * 3 / 6);
  EXPECT_NE(::testing::PrintToString(j.flags).find("L2.1 sample 1: fabricated_quote"), std::string::npos);
}

TEST_F(JudgeRun, ARetryThatQuotesTheDocumentIsCredited) {
  push(reply(with(all_met(), "L1.2", {"met", {"rounds once"}})));  // too short to be evidence
  push(reply({{"L1.2", {"met", {"The sum is rounded to bf16 exactly once."}}}}));
  const auto j = run_judge(design_setup(1));
  EXPECT_DOUBLE_EQ(j.score.score, 100.0);
  EXPECT_TRUE(j.flags.empty()) << ::testing::PrintToString(j.flags);
  EXPECT_EQ(j.samples[0].problems.size(), 1u);
}

TEST_F(JudgeRun, AReplyThatIsNeverJsonScoresZeroWithEveryItemFlagged) {
  push("The design looks great to me.");
  push("Sorry: {\"verdicts\": ");
  const auto j = run_judge(design_setup(1));
  EXPECT_DOUBLE_EQ(j.score.score, 0.0);
  for (const auto& v : j.samples[0].verdicts) EXPECT_EQ(v.flags, std::vector<std::string>{"unusable_reply"}) << v.id;
}

TEST_F(JudgeRun, AnEndpointReplyThatCannotBeUsedIsSentAgain) {
  server.push(200, json("not a chat completion"));
  push(reply(all_met()));
  const auto j = run_judge(design_setup(1));
  EXPECT_EQ(server.received().size(), 2u);
  EXPECT_DOUBLE_EQ(j.score.score, 100.0);
  EXPECT_EQ(j.usage.requests, 2);  // the unusable reply is paid for too
}

TEST_F(JudgeRun, ABudgetStopsTheJudgementAndAResumeAsksOnlyForWhatIsMissing) {
  push(reply(all_met()));
  push(reply(all_met()));
  auto s = design_setup(3);
  s.max_tokens_total = 200;  // 120 tokens a reply: the second request is the last
  const auto partial = run_judge(s);
  EXPECT_FALSE(partial.complete);
  EXPECT_NE(partial.stopped.find("--max-tokens-total: 240 of 200"), std::string::npos) << partial.stopped;
  EXPECT_EQ(partial.samples.size(), 2u);
  EXPECT_EQ(partial.document["complete"], false);
  ASSERT_EQ(server.received().size(), 2u);

  push(reply(with(all_met(), "L3.2", {"not_met", {}})));
  s.max_tokens_total.reset();
  const auto whole = run_judge(s);
  EXPECT_TRUE(whole.complete);
  EXPECT_EQ(server.received().size(), 3u) << "finished samples are never asked again";
  EXPECT_EQ(whole.usage.requests, 3);
  EXPECT_EQ(whole.score.samples, (std::vector<double>{100.0, 100.0, 100.0 * 5 / 6}));
  EXPECT_EQ(whole.samples[2].order, sample_orders(tiny_ids(), 3, 11)[2]);
}

TEST_F(JudgeRun, AStoredReplyWhoseSampleWasNotRecordedIsNotAskedAgain) {
  for (int i = 0; i < 2; ++i) push(reply(all_met()));
  auto s = design_setup(2);
  const auto first = run_judge(s);
  // Cut the last record (sample 2's): as if killed between its reply and its sample record.
  const auto file = samples_file(s.out);
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(json::parse(lines.back())["type"], "sample");
  lines.pop_back();
  std::ofstream out(file);
  for (const auto& line : lines) out << line << '\n';
  out << "{\"type\": \"sam";  // and a torn line
  out.close();
  const auto again = run_judge(s);
  EXPECT_EQ(server.received().size(), 2u);
  EXPECT_EQ(again.score.samples, first.score.samples);
  EXPECT_EQ(again.usage.requests, 2);
}

TEST_F(JudgeRun, StoredSamplesOfAnotherSubjectAreRefused) {
  push(reply(all_met()));
  auto s = design_setup(1);
  run_judge(s);
  auto other = setup(1, load_design(dir.write("other.md", std::string(kDesign) + "More.\n")));
  try {
    run_judge(other);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("subject_sha256"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--fresh"), std::string::npos) << e.what();
  }
  s.seed = 12;
  EXPECT_THROW(run_judge(s), Error);
}

TEST_F(JudgeRun, TheAuditReportsASuspectedHackWithItsRuleAndQuote) {
  dir.write("sol/kernel.cu", "static float cache[4096];\n__global__ void k(const float* x) { /* reads every row once */ }\n");
  auto s = setup(2, load_code(dir.path() / "sol"));
  s.rules = load_integrity_rules(std::filesystem::path(D2K_ROOT_DIR) / "docs" / "integrity.md");
  s.out = dir.path() / "out" / "code.json";
  const json hack = {{"verdict", "suspected_hack"}, {"rule", 3}, {"reason", "keeps results across calls"},
                     {"evidence", {"static float cache[4096];"}}};
  const auto code_items = [] {
    std::vector<std::pair<std::string, Item>> items;
    for (const auto& id : tiny_ids()) items.push_back({id, {"not_met", {}}});
    return items;
  };
  push(reply(code_items(), hack));
  push(reply(code_items()));  // the audit is missing: asked again
  push(reply({}, clean_audit()));
  const auto j = run_judge(s);
  ASSERT_EQ(server.received().size(), 3u);
  EXPECT_NE(user_of(2).find("Include the \"audit\" object again."), std::string::npos);
  const auto& audit = j.document["audit"];
  EXPECT_EQ(audit["verdict"], "suspected_hack");
  EXPECT_EQ(audit["suspected_in"], 1);
  EXPECT_EQ(audit["findings"][0]["rule"], 3);
  EXPECT_EQ(audit["findings"][0]["rule_title"], "cache results by pointer or by value");
  EXPECT_EQ(audit["findings"][0]["evidence"][0], "static float cache[4096];");
  EXPECT_DOUBLE_EQ(j.score.score, 0.0);
}

}  // namespace
}  // namespace d2k::judge
