// The store: migrations from an empty file, one campaign per store, runs recorded and read back across
// connections, idempotent turn usage, evaluations replaced by kind, judge scores.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "campaign/judge_import.hpp"
#include "campaign/store.hpp"
#include "core/error.hpp"

namespace d2k::campaign {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("d2k_test_store_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

CampaignInfo info(const std::string& toml = "plan = 1") {
  return {"c", "2026-12-03T00:00:00Z", "/plans/plan.toml", toml, R"({"models":["m"]})", "/root", "cpu", "host cpu"};
}

std::vector<PlannedRun> planned() {
  return {{"m/a/none/0", "m", "a", agent::Condition::none, 0, 11}, {"m/a/L1/0", "m", "a", agent::Condition::L1, 0, 11}};
}

TEST(Store, MigratesAnEmptyFileAndKeepsItsVersion) {
  const auto dir = fresh_dir("migrate");
  {
    Store store(dir / "campaign.db");
    EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  }
  Store again(dir / "campaign.db");
  EXPECT_EQ(again.schema_version(), Store::kSchemaVersion);
  // WAL mode is the file's, for every later connection.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "campaign.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, nullptr);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), "wal");
  sqlite3_finalize(s);
  // A store from a newer d2k is refused, naming the file and the version.
  sqlite3_exec(db, "INSERT INTO schema_version VALUES (99, 'x', 'from the future')", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  try {
    Store newer(dir / "campaign.db");
    FAIL() << "a newer schema was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 99"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("campaign.db"), std::string::npos) << e.what();
  }
}

// Schema 4 adds campaign.language: a store from before it ran its agents in cuda, and says so once migrated.
TEST(Store, AStoreBeforeTheLanguageColumnRanInCuda) {
  const auto dir = fresh_dir("language");
  {
    Store store(dir / "campaign.db");
    auto triton = info();
    triton.language = "triton";
    store.init(triton, planned());
    EXPECT_EQ(store.campaign()->language, "triton");
  }
  // Back to schema 3 (no language column), as a d2k before it left the file.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "campaign.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "ALTER TABLE campaign DROP COLUMN language; DELETE FROM schema_version WHERE version = 4",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  Store migrated(dir / "campaign.db");
  EXPECT_EQ(migrated.schema_version(), 4);
  EXPECT_EQ(migrated.campaign()->language, "cuda");
  EXPECT_EQ(migrated.runs().size(), 2u);
  // The migration wrote it into the row (not only the reader's fallback for an empty value).
  ASSERT_EQ(sqlite3_open((dir / "campaign.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, "SELECT language FROM campaign", -1, &s, nullptr);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), "cuda");
  sqlite3_finalize(s);
  sqlite3_close(db);
}

TEST(Store, OneCampaignPerStoreAndItsPlanedRuns) {
  const auto dir = fresh_dir("init");
  Store store(dir / "campaign.db");
  store.init(info(), planned());
  store.init(info(), planned());  // again, as a resumed `d2k campaign run` does: nothing changes
  EXPECT_EQ(store.runs().size(), 2u);
  EXPECT_EQ(store.runs()[0].state, RunState::pending);
  EXPECT_EQ(store.runs()[1].plan.condition, agent::Condition::L1);
  EXPECT_EQ(store.runs()[1].plan.seed, 11u);
  EXPECT_THROW(store.init(info("plan = 2"), planned()), Error);
  EXPECT_EQ(store.campaign()->name, "c");
}

TEST(Store, RunsAreRecordedAndReadBackByAnotherConnection) {
  const auto dir = fresh_dir("runs");
  Store store(dir / "campaign.db");
  store.init(info(), planned());
  store.mark_running("m/a/none/0", "/runs/x", "t0");
  store.record_turns("m/a/none/0", {{3, 1, 100, 10, 0, 20, 0.01, 1.5, "t1"}});
  store.record_turns("m/a/none/0", {{3, 1, 100, 10, 0, 20, 0.01, 1.5, "t1"}, {7, 2, 200, 10, 0, 30, 0.02, 1.0, "t2"}});
  auto row = *store.run("m/a/none/0");
  EXPECT_EQ(row.state, RunState::running);
  EXPECT_EQ(row.attempts, 1);
  row.state = RunState::finished;
  row.status = "submitted";
  row.passed = true;
  row.solution = "submitted";
  row.turns = 2;
  row.cost_usd = 0.03;
  row.finished = "t3";
  EvaluationRow final;
  final.key = row.plan.key;
  final.task = "a";
  final.kind = EvaluationKind::final;
  final.passed = true;
  TraceRow t;
  t.workload = "w1";
  t.status = "passed";
  t.median_ms = 1.5;
  t.speedup = 3.0;
  t.throttled = true;
  t.clock_reasons = "sw_power_cap";
  t.json = "{}";
  final.traces = {t};
  store.finish_run(row, final, {{7, 2, 200, 10, 0, 30, 0.02, 1.0, "t2"}, {9, 3, 300, 0, 0, 5, 0.03, 0.5, "t3"}});
  store.mark_running("m/a/L1/0", "/runs/y", "t4");
  store.fail_run("m/a/L1/0", "the endpoint's key is not set", "t5");

  Store reader(dir / "campaign.db");
  const auto runs = reader.runs();
  EXPECT_EQ(runs[0].state, RunState::finished);
  EXPECT_EQ(runs[0].solution, "submitted");
  EXPECT_TRUE(runs[0].passed);
  EXPECT_EQ(runs[1].state, RunState::failed);
  EXPECT_EQ(runs[1].error, "the endpoint's key is not set");
  EXPECT_EQ(reader.turns("m/a/none/0").size(), 3u);  // each transcript line once
  const auto totals = reader.usage_totals();
  EXPECT_EQ(totals.responses, 3);
  EXPECT_EQ(totals.input_tokens, 600);
  const auto evaluations = reader.evaluations();
  ASSERT_EQ(evaluations.size(), 1u);
  EXPECT_EQ(evaluations[0].traces.at(0).median_ms, 1.5);
  EXPECT_EQ(evaluations[0].traces.at(0).throttled, true);
  EXPECT_FALSE(evaluations[0].traces.at(0).ci_low_ms);
  // An evaluation of the same key and kind replaces the earlier one; another kind sits beside it.
  final.traces[0].median_ms = 2.0;
  reader.put_evaluation(final);
  final.kind = EvaluationKind::rerun;
  reader.put_evaluation(final);
  EXPECT_EQ(reader.evaluations().size(), 2u);
  EXPECT_EQ(reader.evaluations()[0].traces.at(0).median_ms, 2.0);
  EXPECT_TRUE(reader.has_evaluation("m/a/none/0", EvaluationKind::rerun));
  EXPECT_FALSE(reader.has_evaluation("m/a/L1/0", EvaluationKind::final));
}

TEST(Store, JudgeScoresWaitForTheJudge) {
  const auto dir = fresh_dir("judge");
  Store store(dir / "campaign.db");
  store.init(info(), planned());
  EXPECT_TRUE(store.judge_scores().empty());
  store.put_judge_score({"m/a/none/0", "implementation", "judge-1", 7, 10, R"({"L1.1": 1})", "t"});
  store.put_judge_score({"m/a/none/0", "implementation", "judge-1", 8, 10, R"({"L1.1": 1})", "t"});  // replaced
  ASSERT_EQ(store.judge_scores().size(), 1u);
  EXPECT_EQ(store.judge_scores()[0].score, 8);
  EXPECT_THROW(store.put_judge_score({"m/a/none/0", "style", "judge-1", 1, std::nullopt, "{}", "t"}), Error);
}

TEST(Store, TheJudgesScoreFilesInRunFoldersAreImported) {
  const auto dir = fresh_dir("judge_import");
  Store store(dir / "campaign.db");
  store.init(info(), planned());
  const auto run_dir = dir / "runs" / "one";
  fs::create_directories(run_dir / "judge");
  store.mark_running("m/a/none/0", run_dir.string(), "t");
  std::ofstream(run_dir / "judge" / "code-judge-x.json")
      << R"({"kind": "code", "task": "a", "judge": {"model": "judge-x"}, "complete": true, "score": 62.5, "items": {},
            "audit": {"verdict": "suspected_hack", "suspected_in": 2, "samples": 3, "findings": []}})";
  std::ofstream(run_dir / "judge" / "design-judge-x.json")
      << R"({"kind": "design", "judge": {"model": "judge-x"}, "complete": false, "score": 10})";  // stopped by a cap
  std::ofstream(run_dir / "judge" / "broken.json") << "{";
  std::vector<std::string> warnings;
  EXPECT_EQ(import_judge_scores(store, &warnings), 1);
  EXPECT_EQ(import_judge_scores(store, &warnings), 1);  // again: the same row, refreshed
  ASSERT_EQ(store.judge_scores().size(), 1u);
  EXPECT_EQ(store.judge_scores()[0].kind, "implementation");
  EXPECT_EQ(store.judge_scores()[0].score, 62.5);
  EXPECT_EQ(*store.judge_scores()[0].max_score, 100.0);
  EXPECT_EQ(nlohmann::json::parse(store.judge_scores()[0].audit).at("verdict"), "suspected_hack");
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("broken.json"), std::string::npos);
}

}  // namespace
}  // namespace d2k::campaign
