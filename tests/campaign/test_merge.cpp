// Shards and their merge: how runs are dealt to shards, a store per shard, and `d2k campaign merge`'s
// rules: the same plan and shard count or a refusal naming the file with nothing written; duplicates
// counted once; missing shards left pending; merging again changes nothing, or brings in what a
// resubmitted shard finished since.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "campaign/merge.hpp"
#include "campaign/shard.hpp"
#include "campaign/store.hpp"
#include "core/error.hpp"

namespace d2k::campaign {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("d2k_test_merge_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

constexpr const char* kPlan = R"toml([campaign]
name = "sharded"
models_file = "models.toml"
models = ["m", "n"]
tasks = ["act/a", "moe/b", "moe/c"]
conditions = ["none", "L1", "design-only"]
repeats = 2
device = "cpu"
)toml";

Plan the_plan(const std::string& text = kPlan) { return parse_plan(text, "/plans/plan.toml"); }

CampaignInfo info_of(const Plan& plan, const std::string& device_name = "host cpu") {
  return {plan.name, "2026-12-03T00:00:00Z", plan.file.string(), plan.text, "{}", "/root", "cpu", device_name};
}

EvaluationRow evaluation(const std::string& key, const std::string& task, EvaluationKind kind, double ms) {
  EvaluationRow e;
  e.key = key;
  e.task = task;
  e.kind = kind;
  e.solution = "submitted";
  e.seed = 3;
  e.device = "cpu";
  e.created = "t";
  e.passed = true;
  TraceRow t;
  t.workload = "w";
  t.status = "passed";
  t.median_ms = ms;
  t.json = "{}";
  e.traces = {t};
  return e;
}

// A shard store as `d2k campaign run --shard` leaves it: its experts, and its first `finish` runs finished
// (with a re-run each), the next one running.
fs::path write_shard(const fs::path& dir, const Plan& plan, const Shard& shard, int finish = 1 << 30,
                     double ms = 1.0) {
  const auto file = shard_store(dir, shard);
  Store store(file);
  store.set_shard(shard);
  const auto runs = shard_runs(plan.runs(), shard);
  store.init(info_of(plan), runs);
  for (const auto& task : shard_experts(plan.tasks, shard))
    if (!store.has_evaluation("expert/" + task, EvaluationKind::expert))
      store.put_evaluation(evaluation("expert/" + task, task, EvaluationKind::expert, 0.5));
  int done = 0;
  for (const auto& r : runs) {
    auto row = *store.run(r.key);
    if (row.state == RunState::finished) {
      ++done;
      continue;
    }
    store.mark_running(r.key, (dir / "runs" / folder_of(r.key)).string(), "t1");
    if (done >= finish) break;
    store.record_turns(r.key, {{2, 1, 100, 0, 0, 10, 0.01, 1.0, "t1"}});
    row = *store.run(r.key);
    row.state = RunState::finished;
    row.status = "submitted";
    row.passed = true;
    row.solution = "submitted";
    row.turns = 1;
    row.input_tokens = 100;
    row.output_tokens = 10;
    row.cost_usd = 0.01;
    row.finished = "t2";
    store.finish_run(row, evaluation(r.key, r.task, EvaluationKind::final, ms), {{2, 1, 100, 0, 0, 10, 0.01, 1.0, "t1"}});
    store.put_evaluation(evaluation(r.key, r.task, EvaluationKind::rerun, ms));
    ++done;
  }
  return file;
}

// A re-run the shard never recorded (stopped after its runs, before its re-runs).
void drop_rerun(const fs::path& file, const std::string& key) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  const auto sql = "DELETE FROM evaluation WHERE kind = 'rerun' AND key = '" + key + "'";
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_EQ(sqlite3_changes(db), 1);
  sqlite3_close(db);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::map<std::string, RunState> states(const fs::path& file) {
  std::map<std::string, RunState> out;
  for (const auto& r : Store(file).runs()) out[r.plan.key] = r.state;
  return out;
}

TEST(Shard, EveryRunIsDealtToOneShardEvenlyAndAlwaysTheSame) {
  const auto plan = the_plan();
  const auto runs = plan.runs();
  ASSERT_EQ(runs.size(), 36u);
  for (int count : {1, 2, 3, 5, 36}) {
    std::map<std::string, int> seen;
    std::size_t smallest = runs.size(), largest = 0;
    for (int i = 0; i < count; ++i) {
      const auto mine = shard_runs(runs, {i, count});
      EXPECT_EQ(mine, shard_runs(runs, {i, count}));  // the same again
      smallest = std::min(smallest, mine.size());
      largest = std::max(largest, mine.size());
      for (const auto& r : mine) ++seen[r.key];
    }
    EXPECT_EQ(seen.size(), runs.size()) << count;
    for (const auto& [key, n] : seen) EXPECT_EQ(n, 1) << key;
    EXPECT_LE(largest - smallest, 1u) << count;
  }
  // Dealt by key, not by position: every shard of two gets every condition (dealing in plan order would
  // give one shard repeat 0 and the other repeat 1; of three shards, one all design-only runs).
  for (int count : {2, 3}) {
    for (int i = 0; i < count; ++i) {
      std::set<agent::Condition> conditions;
      for (const auto& r : shard_runs(runs, {i, count})) conditions.insert(r.condition);
      EXPECT_EQ(conditions.size(), 3u) << "shard " << i << " of " << count;
    }
  }
  // Experts: each task's in one shard.
  std::multiset<std::string> experts;
  for (int i = 0; i < 2; ++i)
    for (const auto& t : shard_experts(plan.tasks, {i, 2})) experts.insert(t);
  EXPECT_EQ(experts, (std::multiset<std::string>{"act/a", "moe/b", "moe/c"}));
  EXPECT_EQ(shard_runs(runs, {}), runs);  // a whole campaign
}

TEST(Shard, ShardsAreNamedIOfN) {
  EXPECT_EQ(parse_shard("1/4"), (Shard{1, 4}));
  EXPECT_EQ(parse_shard("0/1"), (Shard{0, 1}));
  for (const char* bad : {"4/4", "-1/2", "1", "1/0", "a/2", "1/2/3", "", "1/ 2"}) {
    const auto e = error_of([&] { parse_shard(bad); });
    EXPECT_NE(e.find(std::string("--shard ") + bad + ":"), std::string::npos) << bad << ": " << e;
  }
  EXPECT_EQ(shard_store("/c", {1, 4}), fs::path("/c/campaign.shard-1-of-4.db"));
  const auto dir = fresh_dir("find");
  for (const char* name : {"campaign.shard-1-of-2.db", "campaign.shard-0-of-2.db", "campaign.db", "campaign.shard-0-of-2.db-wal"})
    std::ofstream(dir / name) << "";
  const auto found = find_shard_stores(dir);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].shard, (Shard{0, 2}));
  EXPECT_EQ(found[1].file, dir / "campaign.shard-1-of-2.db");
  std::ofstream(dir / "campaign.shard-0-of-3.db") << "";
  EXPECT_NE(error_of([&] { find_shard_stores(dir); }).find("shard stores of 2 and of 3 shards"), std::string::npos);
}

TEST(Shard, AStoreHoldsOneShardOrTheWholeCampaign) {
  const auto dir = fresh_dir("set_shard");
  const auto plan = the_plan();
  Store store(dir / "s.db");
  store.set_shard({0, 2});
  store.set_shard({0, 2});  // again, as a resubmitted shard does
  EXPECT_EQ(store.shard(), (Shard{0, 2}));
  EXPECT_NE(error_of([&] { store.set_shard({1, 2}); }).find("the store of shard 0 of 2, not of shard 1 of 2"), std::string::npos);
  EXPECT_NE(error_of([&] { store.set_shard({}); }).find("not of the whole campaign"), std::string::npos);
  Store whole(dir / "campaign.db");
  whole.set_shard({});
  whole.init(info_of(plan), plan.runs());
  EXPECT_NE(error_of([&] { whole.set_shard({1, 2}); }).find("a shard writes its own store"), std::string::npos);
  EXPECT_FALSE(whole.shard());
}

TEST(Merge, TwoShardsMakeTheWholeCampaignAndMergingAgainChangesNothing) {
  const auto dir = fresh_dir("whole");
  const auto plan = the_plan();
  const auto s0 = write_shard(dir, plan, {0, 2});
  const auto s1 = write_shard(dir, plan, {1, 2});
  const auto result = merge_shards(dir / "campaign.db", {s0, s1});
  EXPECT_TRUE(result.complete());
  EXPECT_EQ(result.runs, 36);
  EXPECT_EQ(result.finished, 36);
  EXPECT_EQ(result.counts.runs_updated, 36);
  EXPECT_EQ(result.counts.evaluations_added, 36 * 2 + 3);  // final and re-run per run, an expert per task
  EXPECT_EQ(result.counts.turns_added, 36);
  Store merged(dir / "campaign.db");
  EXPECT_FALSE(merged.shard());
  EXPECT_EQ(merged.campaign()->plan_toml, plan.text);
  EXPECT_EQ(merged.runs().size(), 36u);
  EXPECT_EQ(merged.runs()[0].plan, plan.runs()[0]);  // the plan's order, not the shards'
  EXPECT_EQ(merged.usage_totals().responses, 36);
  ASSERT_EQ(merged.merged_shards().size(), 2u);
  EXPECT_EQ(merged.merged_shards()[1].finished, 18);
  // Each row as its shard wrote it.
  for (const auto& file : {s0, s1})
    for (const auto& r : Store(file).runs()) EXPECT_EQ(*merged.run(r.plan.key), r) << r.plan.key;

  const auto before = merged.contents();
  const auto stamps = merged.merged_shards();
  const auto again = merge_shards(dir / "campaign.db", {s1, s0});
  EXPECT_EQ(again.counts.runs_updated, 0);
  EXPECT_EQ(again.counts.runs_unchanged, 36);
  EXPECT_EQ(again.counts.evaluations_added, 0);
  EXPECT_EQ(again.counts.turns_added, 0);
  const auto after = Store(dir / "campaign.db").contents();
  EXPECT_EQ(after.runs, before.runs);
  EXPECT_EQ(after.evaluations.size(), before.evaluations.size());
  EXPECT_EQ(Store(dir / "campaign.db").merged_shards()[0].merged, stamps[0].merged);  // nothing to record
}

TEST(Merge, AStoreNamedTwiceCountsOnce) {
  const auto dir = fresh_dir("duplicate");
  const auto plan = the_plan();
  const auto s0 = write_shard(dir, plan, {0, 2});
  const auto s1 = write_shard(dir, plan, {1, 2});
  const auto result = merge_shards(dir / "campaign.db", {s0, s1, s0, dir / "." / s1.filename()});
  EXPECT_EQ(result.merged.size(), 2u);
  EXPECT_TRUE(result.complete());
  EXPECT_EQ(result.counts.runs_updated, 36);
}

TEST(Merge, AMissingShardLeavesItsRunsPendingUntilItIsMerged) {
  const auto dir = fresh_dir("missing");
  const auto plan = the_plan();
  const auto s1 = write_shard(dir, plan, {1, 2});
  auto result = merge_shards(dir / "campaign.db", {s1});
  EXPECT_FALSE(result.complete());
  EXPECT_EQ(result.missing, std::vector<int>{0});
  EXPECT_EQ(result.runs, 36);
  EXPECT_EQ(result.finished, 18);
  for (const auto& r : shard_runs(plan.runs(), {0, 2})) EXPECT_EQ(states(dir / "campaign.db")[r.key], RunState::pending);

  // Shard 0 killed after three runs (the fourth in flight), merged; then resubmitted and finished.
  const auto s0 = write_shard(dir, plan, {0, 2}, 3);
  result = merge_shards(dir / "campaign.db", {s0, s1});
  EXPECT_TRUE(result.missing.empty());
  EXPECT_FALSE(result.complete());
  EXPECT_EQ(result.finished, 21);
  EXPECT_EQ(result.counts.runs_updated, 4);     // shard 0's three finished runs and its running one
  EXPECT_EQ(result.counts.runs_unchanged, 32);  // shard 1's, and shard 0's pending ones
  EXPECT_EQ(states(dir / "campaign.db")[shard_runs(plan.runs(), {0, 2})[3].key], RunState::running);
  EXPECT_EQ(result.evaluations_left, 0);  // its three finished runs have their re-runs, its expert is done
  write_shard(dir, plan, {0, 2});
  result = merge_shards(dir / "campaign.db", {s0, s1});
  EXPECT_TRUE(result.complete());
  EXPECT_EQ(result.counts.runs_updated, 15);  // the three that finished before the kill are unchanged
  EXPECT_EQ(result.counts.runs_unchanged, 21);
  // Every run finished, but a re-run missing (the shard was stopped in its re-runs): not complete.
  drop_rerun(s1, shard_runs(plan.runs(), {1, 2})[0].key);
  result = merge_shards(dir / "campaign.db", {s0, s1});
  EXPECT_EQ(result.finished, 36);
  EXPECT_EQ(result.evaluations_left, 1);
  EXPECT_FALSE(result.complete());
  // A shard whose task stopped before it recorded the plan: present, empty, its runs pending.
  const auto other = fresh_dir("missing_empty");
  Store(shard_store(other, {0, 2})).set_shard({0, 2});
  result = merge_shards(other / "campaign.db", {shard_store(other, {0, 2}), write_shard(other, plan, {1, 2})});
  EXPECT_EQ(result.empty.size(), 1u);
  EXPECT_TRUE(result.missing.empty());
  EXPECT_EQ(result.finished, 18);
}

TEST(Merge, StoresOfAnotherPlanOrShardingAreRefusedAndNothingIsWritten) {
  const auto dir = fresh_dir("conflicts");
  const auto plan = the_plan();
  const auto s0 = write_shard(dir, plan, {0, 2});
  const auto s1 = write_shard(dir, plan, {1, 2});
  const auto target = dir / "campaign.db";

  // Another plan text.
  const auto other = fresh_dir("conflicts_other");
  const auto changed = the_plan(std::string(kPlan) + "\n[budget]\nturns = 9\n");
  const auto o1 = write_shard(other, changed, {1, 2});
  auto e = error_of([&] { merge_shards(target, {s0, o1}); });
  EXPECT_NE(e.find(o1.string()), std::string::npos) << e;
  EXPECT_NE(e.find("the same name, another plan text"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(target));  // refused before the merged store was made

  // Another shard count.
  const auto three = fresh_dir("conflicts_three");
  const auto t1 = write_shard(three, plan, {1, 3});
  e = error_of([&] { merge_shards(target, {s0, t1}); });
  EXPECT_NE(e.find("shard 1 of 3"), std::string::npos) << e;
  EXPECT_NE(e.find(t1.string()), std::string::npos) << e;

  // A shard whose agents wrote another language (campaign.language): not one campaign's arms.
  const auto language = fresh_dir("conflicts_language");
  {
    Store store(shard_store(language, {1, 2}));
    store.set_shard({1, 2});
    auto triton = info_of(plan);
    triton.language = "triton";
    store.init(triton, shard_runs(plan.runs(), {1, 2}));
  }
  e = error_of([&] { merge_shards(target, {s0, shard_store(language, {1, 2})}); });
  EXPECT_NE(e.find(shard_store(language, {1, 2}).string() + ": ran in the triton language, " + s0.string() +
                   " in the cuda language"),
            std::string::npos)
      << e;

  // Two stores of one shard.
  const auto copy = fresh_dir("conflicts_copy");
  const auto c0 = write_shard(copy, plan, {0, 2}, 5);
  e = error_of([&] { merge_shards(target, {s0, c0, s1}); });
  EXPECT_NE(e.find("two stores of one shard"), std::string::npos) << e;

  // A whole campaign's store is not a shard; nor is the target one.
  Store whole(copy / "campaign.db");
  whole.init(info_of(plan), plan.runs());
  e = error_of([&] { merge_shards(target, {s0, copy / "campaign.db"}); });
  EXPECT_NE(e.find("not a shard store"), std::string::npos) << e;
  e = error_of([&] { merge_shards(s0, {s1}); });
  EXPECT_NE(e.find("not a campaign's store"), std::string::npos) << e;
  e = error_of([&] { merge_shards(target, {dir / "nowhere.db"}); });
  EXPECT_NE(e.find("nowhere.db: no such shard store"), std::string::npos) << e;

  // A store holding a run that is not its shard's.
  const auto stray = fresh_dir("conflicts_stray");
  {
    Store store(shard_store(stray, {0, 2}));
    store.set_shard({0, 2});
    store.init(info_of(plan), shard_runs(plan.runs(), {1, 2}));
  }
  e = error_of([&] { merge_shards(target, {shard_store(stray, {0, 2})}); });
  EXPECT_NE(e.find("which is not one of its runs"), std::string::npos) << e;

  // A finished run whose results differ from the merged store's: refused, and the merge's other rows
  // are not written either (one transaction).
  merge_shards(target, {s1});
  const auto late = fresh_dir("conflicts_late");
  const auto l0 = write_shard(late, plan, {0, 2});
  const auto l1 = write_shard(late, plan, {1, 2}, 1 << 30, 2.0);  // other times, another run folder
  const auto before = Store(target).contents();
  e = error_of([&] { merge_shards(target, {l1, l0}); });
  EXPECT_NE(e.find(l1.string()), std::string::npos) << e;
  EXPECT_NE(e.find("two stores disagree about a finished run"), std::string::npos) << e;
  const auto after = Store(target).contents();
  EXPECT_EQ(after.runs, before.runs);  // shard 0's runs (absorbed first) are not in
  EXPECT_EQ(after.evaluations.size(), before.evaluations.size());

  // A merged store of two shards takes no store of three.
  const auto t0 = write_shard(three, plan, {0, 3});
  e = error_of([&] { merge_shards(target, {t0}); });
  EXPECT_NE(e.find("merged from 2 shards before"), std::string::npos) << e;
}

TEST(Merge, ShardProgressSaysWhatIsLeft) {
  const auto dir = fresh_dir("progress");
  const auto plan = the_plan();
  const Shard shard{0, 2};
  auto p = shard_progress(shard_store(dir, shard), plan, shard);
  EXPECT_FALSE(p.started);
  EXPECT_EQ(p.left, 18 + static_cast<int>(shard_experts(plan.tasks, shard).size()));
  write_shard(dir, plan, shard, 4);
  p = shard_progress(shard_store(dir, shard), plan, shard);
  EXPECT_TRUE(p.started);
  EXPECT_EQ(p.finished, 4);
  EXPECT_EQ(p.left, 14);
  write_shard(dir, plan, shard);
  p = shard_progress(shard_store(dir, shard), plan, shard);
  EXPECT_TRUE(p.done());
  // Another plan text for the same shard's store is refused, naming it.
  const auto changed = the_plan(std::string(kPlan) + "\n[budget]\nturns = 9\n");
  const auto e = error_of([&] { shard_progress(shard_store(dir, shard), changed, shard); });
  EXPECT_NE(e.find("campaign.shard-0-of-2.db"), std::string::npos) << e;
}

}  // namespace
}  // namespace d2k::campaign
