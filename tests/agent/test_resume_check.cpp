// Issue 18, item 7: what a resume may change, and what it refuses.
#include <gtest/gtest.h>

#include <string>

#include "agent/records.hpp"
#include "agent/resume_check.hpp"
#include "core/error.hpp"

using nlohmann::json;
using namespace d2k;
using namespace d2k::agent;

namespace {

RunSettings recorded() {
  RunSettings s;
  s.task = "moe/topk_softmax";
  s.model = "gpt";
  s.models_file = "/runs/models.toml";
  s.condition = Condition::L1;
  s.budget.max_turns = 350;
  s.seed = 42;
  s.device = Device::cpu;
  s.sandbox = "strict";
  return s;
}

std::string refusal(const std::vector<GivenOption>& given) {
  auto settings = recorded();
  try {
    apply_resume_options(settings, given, "t");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

llm::ModelConfig model() {
  llm::ModelConfig m;
  m.name = "gpt";
  m.model = "gpt-5";
  m.base_url = "https://api.example.com/v1";
  m.prices = {1.25, 0.125, 10.0, 1.25};
  return m;
}

}  // namespace

TEST(ResumeCheck, RefusesAnOptionThatChangesTheExperimentNamingBothValues) {
  const auto turns = refusal({{"--turns", "/budget/max_turns", 5}});
  EXPECT_NE(turns.find("--turns 5"), std::string::npos) << turns;
  EXPECT_NE(turns.find("budget.max_turns = 350"), std::string::npos) << turns;
  EXPECT_NE(refusal({{"--seed", "/seed", 7}}).find("seed = 42"), std::string::npos);
  EXPECT_NE(refusal({{"--task", "/task", "norm/rmsnorm"}}).find("task = \"moe/topk_softmax\""), std::string::npos);
  EXPECT_NE(refusal({{"--condition", "/condition", "L1+L2"}}).find("--condition \"L1+L2\""), std::string::npos);
  EXPECT_NE(refusal({{"--device", "/device", "cuda"}}).find("device = \"cpu\""), std::string::npos);
  EXPECT_NE(refusal({{"--workload", "/workloads", json::array({"w"})}}).find("workloads = []"), std::string::npos);
  EXPECT_NE(refusal({{"--no-baseline", "/baseline", false}}).find("baseline = true"), std::string::npos);
  // The same value again changes nothing and is no refusal.
  EXPECT_EQ(refusal({{"--turns", "/budget/max_turns", 350}, {"--seed", "/seed", 42}}), "");
}

TEST(ResumeCheck, AppliesAndRecordsTheSandboxAndSpendingCaps) {
  auto settings = recorded();
  apply_resume_options(settings,
                       {{"--sandbox", "/sandbox", "best-effort"}, {"--max-cost-usd", "/budget/max_cost_usd", 2.5},
                        {"--max-wall-seconds", "/budget/max_wall_seconds", 600.0}, {"--seed", "/seed", 42}},
                       "2026-01-01T00:00:00Z");
  EXPECT_EQ(settings.sandbox, "best-effort");
  EXPECT_EQ(settings.budget.max_cost_usd, 2.5);
  EXPECT_EQ(settings.budget.max_wall_seconds, 600.0);
  ASSERT_EQ(settings.changes.size(), 3u);
  EXPECT_EQ(settings.changes[0].option, "--sandbox");
  EXPECT_EQ(settings.changes[0].from, "strict");
  EXPECT_EQ(settings.changes[0].to, "best-effort");
  EXPECT_EQ(settings.changes[1].from, nullptr);
  EXPECT_EQ(settings.changes[2].time, "2026-01-01T00:00:00Z");
  // run.json keeps them, and a second resume adds to the list.
  auto again = json(settings).get<RunSettings>();
  apply_resume_options(again, {{"--sandbox", "/sandbox", "off"}}, "t2");
  ASSERT_EQ(again.changes.size(), 4u);
  EXPECT_EQ(again.changes[3].from, "best-effort");
}

TEST(ResumeCheck, RefusesAModelsFileWithOtherPricesAndRecordsAnotherPath) {
  auto settings = recorded();
  settings.model_entry = model_entry(model());
  auto dearer = model();
  dearer.prices.input = 3.0;
  try {
    check_model_entry(settings, dearer, "/tmp/other.toml", "t");
    ADD_FAILURE() << "other prices were accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("/tmp/other.toml: models.gpt.prices.input is 3.0 where the run has 1.25"), std::string::npos)
        << message;
  }
  auto other_id = model();
  other_id.model = "gpt-5-mini";
  EXPECT_THROW(check_model_entry(settings, other_id, "/tmp/other.toml", "t"), Error);
  // Another endpoint, key variable or path: the same model at the same prices.
  auto moved = model();
  moved.base_url = "http://127.0.0.1:9/v1";
  moved.api_key_env = "OTHER_KEY";
  check_model_entry(settings, moved, "/tmp/other.toml", "t");
  EXPECT_EQ(settings.models_file, "/tmp/other.toml");
  ASSERT_EQ(settings.changes.size(), 1u);
  EXPECT_EQ(settings.changes[0].option, "--models");
  EXPECT_EQ(settings.changes[0].from, "/runs/models.toml");
}

TEST(ResumeCheck, TheLanguageIsRecordedAndARunKeepsIt) {
  auto settings = recorded();
  settings.language = Language::triton;
  const json document = settings;
  EXPECT_EQ(document.at("language"), "triton");
  EXPECT_EQ(document.get<RunSettings>().language, Language::triton);
  // A run.json from before the option: its runs were cuda.
  json old = document;
  old.erase("language");
  EXPECT_EQ(old.get<RunSettings>().language, Language::cuda);
  json bad = document;
  bad["language"] = "rust";
  try {
    (void)bad.get<RunSettings>();
    FAIL() << "an unknown language";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("language: unknown language 'rust' (cuda, triton)"), std::string::npos) << e.what();
  }
  // A resume keeps it: the same value passes, another is refused naming both.
  EXPECT_EQ(refusal({{"--language", "/language", "cuda"}}), "");
  EXPECT_NE(refusal({{"--language", "/language", "triton"}}).find("--language \"triton\": the run has language = \"cuda\""),
            std::string::npos);
}
