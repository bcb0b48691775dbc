// Store::contents and Store::absorb: the store's side of `d2k campaign merge` (merge.hpp).
#include <sqlite3.h>

#include <fmt/format.h>

#include <map>
#include <utility>

#include "campaign/store.hpp"
#include "core/error.hpp"

namespace d2k::campaign {
namespace {

std::optional<std::string> text_or_null(const std::string& s) {
  return s.empty() ? std::nullopt : std::optional<std::string>(s);
}

std::string describe(const RunRow& r) {
  return fmt::format("{}{}{}, passed {}, {} turns, ${:.4f}, finished {}", name_of(r.state), r.status.empty() ? "" : " ",
                     r.status, r.passed, r.turns, r.cost_usd, r.finished.empty() ? "-" : r.finished);
}

}  // namespace

StoreContents Store::contents() {
  std::lock_guard lock(mutex_);
  sql::ReadSnapshot snapshot(db_);
  StoreContents c;
  c.file = db_.file();
  c.shard = shard_locked();
  c.campaign = campaign_locked();
  c.runs = runs_locked();
  for (const auto& r : c.runs) {
    auto turns = turns_locked(r.plan.key);
    if (!turns.empty()) c.turns.emplace(r.plan.key, std::move(turns));
  }
  c.evaluations = evaluations_locked();
  c.judge_scores = judge_scores_locked();
  return c;
}

void Store::absorb_run(const StoreContents& shard, const RunRow& run, std::map<std::string, RunRow>& targets,
                       MergeCounts& counts) {
  const auto& key = run.plan.key;
  const auto found = targets.find(key);
  if (found == targets.end()) fail("{}: run {} is not a run of the plan of {}", shard.file, key, db_.file());
  RunRow* target = &found->second;
  if (run == *target) {
    ++counts.runs_unchanged;
    return;
  }
  if (target->plan != run.plan)
    fail("{}: run {} is planned there as {} {} {} repeat {} seed {}; {} plans it with seed {}: not the same plan",
         shard.file, key, run.plan.model, run.plan.task, agent::name_of(run.plan.condition), run.plan.repeat,
         run.plan.seed, db_.file(), target->plan.seed);
  if (target->state == RunState::finished)
    fail("{}: run {} is {} there, but {} holds it {}: two stores disagree about a finished run (a shard store "
         "restored from elsewhere, or the run driven twice); keep the right store and merge again into a new file",
         shard.file, key, describe(run), db_.file(), describe(*target));
  const bool finished = run.state == RunState::finished;
  const auto total = [finished](auto v) { return finished ? std::optional(v) : std::nullopt; };
  db_.prepare("UPDATE run SET state = ?, run_dir = ?, attempts = ?, started = ?, finished = ?, status = ?, reason = ?, "
              "passed = ?, solution = ?, turns = ?, input_tokens = ?, cached_input_tokens = ?, output_tokens = ?, "
              "cost_usd = ?, wall_seconds = ?, error = ? WHERE key = ?")
      .bind(1, std::string(name_of(run.state))).bind(2, text_or_null(run.run_dir)).bind(3, run.attempts)
      .bind(4, text_or_null(run.started)).bind(5, text_or_null(run.finished)).bind(6, text_or_null(run.status))
      .bind(7, text_or_null(run.reason)).bind(8, total(run.passed)).bind(9, text_or_null(run.solution))
      .bind(10, total(run.turns)).bind(11, total(run.input_tokens)).bind(12, total(run.cached_input_tokens))
      .bind(13, total(run.output_tokens)).bind(14, total(run.cost_usd)).bind(15, total(run.wall_seconds))
      .bind(16, text_or_null(run.error)).bind(17, key).run();
  *target = run;
  ++counts.runs_updated;
}

MergeCounts Store::absorb(const CampaignInfo& info, const std::vector<PlannedRun>& runs,
                          const std::vector<StoreContents>& shards, const std::string& time) {
  std::lock_guard lock(mutex_);
  sql::Transaction transaction(db_);
  if (const auto held = shard_locked())
    fail("{}: the store of {}, not a campaign's store: merge into <dir>/campaign.db", db_.file(), name_of(*held));
  init_locked(info, runs);
  MergeCounts counts;
  std::map<std::string, RunRow> targets;
  for (auto& r : runs_locked()) targets.emplace(r.plan.key, std::move(r));
  std::map<std::pair<std::string, EvaluationKind>, EvaluationRow> evaluations;
  for (auto& e : evaluations_locked()) evaluations.emplace(std::pair(e.key, e.kind), std::move(e));
  std::map<std::tuple<std::string, std::string, std::string>, JudgeScore> judge;
  for (auto& j : judge_scores_locked()) judge.emplace(std::tuple(j.key, j.kind, j.judge), std::move(j));
  std::map<int, MergedShard> merged;
  {
    auto s = db_.prepare("SELECT shard, shards, file, merged, runs, finished FROM merged_shard");
    while (s.step())
      merged[static_cast<int>(s.integer(0))] = {{static_cast<int>(s.integer(0)), static_cast<int>(s.integer(1))},
                                                s.text(2), s.text(3), static_cast<int>(s.integer(4)),
                                                static_cast<int>(s.integer(5))};
  }
  auto turn = db_.prepare("INSERT OR IGNORE INTO turn_usage (key, seq, turn, input_tokens, cached_input_tokens, "
                          "cache_write_input_tokens, output_tokens, cost_usd, latency_seconds, time) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (const auto& shard : shards) {
    if (!shard.shard) fail("{}: not a shard store (it records no shard of the plan)", shard.file);
    const MergeCounts before = counts;
    for (const auto& run : shard.runs) absorb_run(shard, run, targets, counts);
    for (const auto& [key, turns] : shard.turns)
      for (const auto& t : turns) {
        turn.bind(1, key).bind(2, t.seq).bind(3, t.turn).bind(4, t.input_tokens).bind(5, t.cached_input_tokens)
            .bind(6, t.cache_write_input_tokens).bind(7, t.output_tokens).bind(8, t.cost_usd).bind(9, t.latency_seconds)
            .bind(10, t.time).run();
        counts.turns_added += sqlite3_changes(db_.handle());
      }
    for (const auto& e : shard.evaluations) {
      const auto it = evaluations.find({e.key, e.kind});
      if (it == evaluations.end()) {
        put_evaluation_locked(e);
        evaluations.emplace(std::pair(e.key, e.kind), e);
        ++counts.evaluations_added;
      } else if (it->second.same_as(e)) {
        ++counts.evaluations_unchanged;
      } else {
        fail("{}: its {} evaluation of {} (created {}, {}) differs from the one {} holds (created {}, {}): two stores "
             "disagree; keep the right store and merge again into a new file",
             shard.file, name_of(e.kind), e.key, e.created, e.passed ? "passed" : "not passed", db_.file(),
             it->second.created, it->second.passed ? "passed" : "not passed");
      }
    }
    for (const auto& j : shard.judge_scores) {
      const auto it = judge.find({j.key, j.kind, j.judge});
      if (it != judge.end() && (it->second == j || it->second.created >= j.created)) continue;
      db_.prepare("INSERT OR REPLACE INTO judge_score (key, kind, judge, score, max_score, items, created, audit) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
          .bind(1, j.key).bind(2, j.kind).bind(3, j.judge).bind(4, j.score).bind(5, j.max_score).bind(6, j.items)
          .bind(7, j.created).bind(8, j.audit).run();
      judge[{j.key, j.kind, j.judge}] = j;
      ++counts.judge_scores_added;
    }
    int finished = 0;
    for (const auto& r : shard.runs) finished += r.state == RunState::finished;
    const MergedShard now{*shard.shard, shard.file, time, static_cast<int>(shard.runs.size()), finished};
    const auto old = merged.find(shard.shard->index);
    const bool changed = counts.runs_updated != before.runs_updated || counts.turns_added != before.turns_added ||
                         counts.evaluations_added != before.evaluations_added ||
                         counts.judge_scores_added != before.judge_scores_added;
    if (old == merged.end() || changed || old->second.file != now.file || old->second.shard != now.shard ||
        old->second.runs != now.runs || old->second.finished != now.finished) {
      db_.prepare("INSERT OR REPLACE INTO merged_shard (shard, shards, file, merged, runs, finished) VALUES (?, ?, ?, ?, ?, ?)")
          .bind(1, now.shard.index).bind(2, now.shard.count).bind(3, now.file).bind(4, now.merged).bind(5, now.runs)
          .bind(6, now.finished).run();
      merged[now.shard.index] = now;
    }
  }
  transaction.commit();
  return counts;
}

std::vector<MergedShard> Store::merged_shards() {
  std::lock_guard lock(mutex_);
  auto s = db_.prepare("SELECT shard, shards, file, merged, runs, finished FROM merged_shard ORDER BY shard");
  std::vector<MergedShard> out;
  while (s.step())
    out.push_back({{static_cast<int>(s.integer(0)), static_cast<int>(s.integer(1))}, s.text(2), s.text(3),
                   static_cast<int>(s.integer(4)), static_cast<int>(s.integer(5))});
  return out;
}

}  // namespace d2k::campaign
