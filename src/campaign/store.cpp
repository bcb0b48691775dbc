#include "campaign/store.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/timestamp.hpp"

namespace d2k::campaign {
namespace {

struct Migration {
  int version;
  const char* description;
  const char* sql;
};

// Append only: a store at version n gets migrations n+1.. on open. Never edit a released step.
constexpr Migration kMigrations[] = {
    {1, "campaign, plan, run, turn usage, evaluation, trace, judge score", R"sql(
CREATE TABLE campaign (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  name TEXT NOT NULL, created TEXT NOT NULL, plan_file TEXT NOT NULL, plan_toml TEXT NOT NULL,
  plan_json TEXT NOT NULL, root TEXT NOT NULL, device TEXT, device_name TEXT);
CREATE TABLE plan (
  key TEXT PRIMARY KEY, model TEXT NOT NULL, task TEXT NOT NULL, condition TEXT NOT NULL,
  repeat INTEGER NOT NULL, seed INTEGER NOT NULL);
CREATE TABLE run (
  key TEXT PRIMARY KEY REFERENCES plan(key),
  state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'finished', 'failed')),
  run_dir TEXT, attempts INTEGER NOT NULL DEFAULT 0, started TEXT, finished TEXT,
  status TEXT, reason TEXT, passed INTEGER, solution TEXT, turns INTEGER,
  input_tokens INTEGER, cached_input_tokens INTEGER, output_tokens INTEGER,
  cost_usd REAL, wall_seconds REAL, error TEXT);
CREATE TABLE turn_usage (
  key TEXT NOT NULL REFERENCES plan(key), seq INTEGER NOT NULL, turn INTEGER NOT NULL,
  input_tokens INTEGER NOT NULL, cached_input_tokens INTEGER NOT NULL, cache_write_input_tokens INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL, latency_seconds REAL NOT NULL, time TEXT NOT NULL,
  PRIMARY KEY (key, seq));
CREATE TABLE evaluation (
  id INTEGER PRIMARY KEY, key TEXT NOT NULL, task TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('final', 'rerun', 'expert')),
  solution TEXT NOT NULL, seed INTEGER NOT NULL, device TEXT NOT NULL, created TEXT NOT NULL,
  passed INTEGER NOT NULL, UNIQUE (key, kind));
CREATE TABLE trace (
  evaluation_id INTEGER NOT NULL REFERENCES evaluation(id) ON DELETE CASCADE, workload TEXT NOT NULL,
  status TEXT NOT NULL, median_ms REAL, ci_low_ms REAL, ci_high_ms REAL,
  baseline_median_ms REAL, baseline_ci_low_ms REAL, baseline_ci_high_ms REAL,
  speedup REAL, sol_fraction REAL, throttled INTEGER, clock_reasons TEXT NOT NULL, json TEXT NOT NULL,
  PRIMARY KEY (evaluation_id, workload));
CREATE TABLE judge_score (
  key TEXT NOT NULL, kind TEXT NOT NULL CHECK (kind IN ('design', 'implementation')), judge TEXT NOT NULL,
  score REAL NOT NULL, max_score REAL, items TEXT NOT NULL, created TEXT NOT NULL,
  PRIMARY KEY (key, kind, judge));
)sql"},
    {2, "judge_score.audit: the judge's audit of a solution, for the report's list of suspected reward hacks", R"sql(
ALTER TABLE judge_score ADD COLUMN audit TEXT NOT NULL DEFAULT '{}';
)sql"},
    {3, "shard: the shard of the plan a shard store holds; merged_shard: the shard stores merged into this one", R"sql(
CREATE TABLE shard (
  id INTEGER PRIMARY KEY CHECK (id = 1), shard INTEGER NOT NULL, shards INTEGER NOT NULL);
CREATE TABLE merged_shard (
  shard INTEGER PRIMARY KEY, shards INTEGER NOT NULL, file TEXT NOT NULL, merged TEXT NOT NULL,
  runs INTEGER NOT NULL, finished INTEGER NOT NULL);
)sql"},
    {4, "campaign.language: the language the campaign's agents write (cuda or triton); every campaign before it wrote cuda",
     R"sql(
ALTER TABLE campaign ADD COLUMN language TEXT;
UPDATE campaign SET language = 'cuda';
)sql"},
};

constexpr const char* kRunColumns =
    "p.key, p.model, p.task, p.condition, p.repeat, p.seed, r.state, r.run_dir, r.attempts, r.started, r.finished, "
    "r.status, r.reason, r.passed, r.solution, r.turns, r.input_tokens, r.cached_input_tokens, r.output_tokens, "
    "r.cost_usd, r.wall_seconds, r.error";

RunRow read_run(const sql::Statement& s) {
  RunRow row;
  row.plan.key = s.text(0);
  row.plan.model = s.text(1);
  row.plan.task = s.text(2);
  const auto condition = agent::parse_condition(s.text(3));
  if (!condition) fail("the store's plan row {} has an unknown condition '{}'", row.plan.key, s.text(3));
  row.plan.condition = *condition;
  row.plan.repeat = static_cast<int>(s.integer(4));
  row.plan.seed = static_cast<uint64_t>(s.integer(5));
  row.state = parse_run_state(s.text(6));
  row.run_dir = s.text(7);
  row.attempts = static_cast<int>(s.integer(8));
  row.started = s.text(9);
  row.finished = s.text(10);
  row.status = s.text(11);
  row.reason = s.text(12);
  row.passed = s.integer(13) != 0;
  row.solution = s.text(14);
  row.turns = static_cast<int>(s.integer(15));
  row.input_tokens = s.integer(16);
  row.cached_input_tokens = s.integer(17);
  row.output_tokens = s.integer(18);
  row.cost_usd = s.real(19);
  row.wall_seconds = s.real(20);
  row.error = s.text(21);
  return row;
}

}  // namespace

Store::Store(const std::filesystem::path& file) : db_(file) { migrate(); }

int Store::schema_version() {
  std::lock_guard lock(mutex_);
  auto s = db_.prepare("SELECT COALESCE(MAX(version), 0) FROM schema_version");
  s.step();
  return static_cast<int>(s.integer(0));
}

void Store::migrate() {
  std::lock_guard lock(mutex_);
  db_.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied TEXT NOT NULL, "
           "description TEXT NOT NULL)");
  for (const auto& m : kMigrations) {
    sql::Transaction transaction(db_);
    auto current = db_.prepare("SELECT COALESCE(MAX(version), 0) FROM schema_version");
    current.step();
    const int at = static_cast<int>(current.integer(0));
    if (at > kSchemaVersion)
      fail("{}: the store has schema version {}, newer than this d2k's {}; use a newer d2k", db_.file(), at, kSchemaVersion);
    if (at >= m.version) continue;
    db_.exec(m.sql);
    db_.prepare("INSERT INTO schema_version (version, applied, description) VALUES (?, ?, ?)")
        .bind(1, m.version).bind(2, utc_timestamp()).bind(3, m.description).run();
    transaction.commit();
  }
  auto current = db_.prepare("SELECT COALESCE(MAX(version), 0) FROM schema_version");
  current.step();
  if (current.integer(0) > kSchemaVersion)
    fail("{}: the store has schema version {}, newer than this d2k's {}; use a newer d2k", db_.file(), current.integer(0),
         kSchemaVersion);
}

void Store::init(const CampaignInfo& info, const std::vector<PlannedRun>& runs) {
  std::lock_guard lock(mutex_);
  sql::Transaction transaction(db_);
  init_locked(info, runs);
  transaction.commit();
}

void Store::init_locked(const CampaignInfo& info, const std::vector<PlannedRun>& runs) {
  auto existing = db_.prepare("SELECT plan_toml, plan_file FROM campaign WHERE id = 1");
  if (existing.step()) {
    if (existing.text(0) != info.plan_toml)
      fail("{}: the campaign was planned with {} as it was then; {} differs from it. Finished runs belong to the "
           "first plan: start a new campaign (another campaign.name) for a changed plan",
           db_.file(), existing.text(1), info.plan_file);
  } else {
    db_.prepare("INSERT INTO campaign (id, name, created, plan_file, plan_toml, plan_json, root, device, device_name, "
                "language) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        .bind(1, info.name).bind(2, info.created).bind(3, info.plan_file).bind(4, info.plan_toml)
        .bind(5, info.plan_json).bind(6, info.root).bind(7, info.device).bind(8, info.device_name)
        .bind(9, info.language).run();
  }
  auto plan = db_.prepare("INSERT OR IGNORE INTO plan (key, model, task, condition, repeat, seed) VALUES (?, ?, ?, ?, ?, ?)");
  auto run = db_.prepare("INSERT OR IGNORE INTO run (key, state) VALUES (?, 'pending')");
  for (const auto& r : runs) {
    plan.bind(1, r.key).bind(2, r.model).bind(3, r.task).bind(4, std::string(agent::name_of(r.condition)))
        .bind(5, r.repeat).bind(6, r.seed).run();
    run.bind(1, r.key).run();
  }
}

std::optional<CampaignInfo> Store::campaign() {
  std::lock_guard lock(mutex_);
  return campaign_locked();
}

std::optional<CampaignInfo> Store::campaign_locked() {
  auto s = db_.prepare(
      "SELECT name, created, plan_file, plan_toml, plan_json, root, device, device_name, language FROM campaign");
  if (!s.step()) return std::nullopt;
  return CampaignInfo{s.text(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5), s.text(6), s.text(7),
                      s.text(8).empty() ? "cuda" : s.text(8)};
}

void Store::set_device(const std::string& device, const std::string& device_name) {
  std::lock_guard lock(mutex_);
  sql::Transaction transaction(db_);
  db_.prepare("UPDATE campaign SET device = ?, device_name = ?").bind(1, device).bind(2, device_name).run();
  transaction.commit();
}

std::vector<RunRow> Store::runs() {
  std::lock_guard lock(mutex_);
  return runs_locked();
}

std::vector<RunRow> Store::runs_locked() {
  auto s = db_.prepare(fmt::format("SELECT {} FROM plan p JOIN run r ON r.key = p.key ORDER BY p.rowid", kRunColumns));
  std::vector<RunRow> out;
  while (s.step()) out.push_back(read_run(s));
  return out;
}

std::optional<RunRow> Store::run(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto s = db_.prepare(fmt::format("SELECT {} FROM plan p JOIN run r ON r.key = p.key WHERE p.key = ?", kRunColumns));
  s.bind(1, key);
  if (!s.step()) return std::nullopt;
  return read_run(s);
}

void Store::mark_running(const std::string& key, const std::string& run_dir, const std::string& time) {
  std::lock_guard lock(mutex_);
  sql::Transaction transaction(db_);
  db_.prepare("UPDATE run SET state = 'running', run_dir = ?, attempts = attempts + 1, "
              "started = COALESCE(started, ?), error = NULL WHERE key = ?")
      .bind(1, run_dir).bind(2, time).bind(3, key).run();
  transaction.commit();
}

void Store::finish_run(const RunRow& row, const EvaluationRow& final, const std::vector<TurnUsage>& turns) {
  std::lock_guard lock(mutex_);
  sql::Transaction transaction(db_);
  record_turns_locked(row.plan.key, turns);
  put_evaluation_locked(final);
  db_.prepare("UPDATE run SET state = 'finished', finished = ?, status = ?, reason = ?, passed = ?, solution = ?, "
              "turns = ?, input_tokens = ?, cached_input_tokens = ?, output_tokens = ?, cost_usd = ?, wall_seconds = ?, "
              "error = NULL WHERE key = ?")
      .bind(1, row.finished).bind(2, row.status).bind(3, row.reason).bind(4, row.passed).bind(5, row.solution)
      .bind(6, row.turns).bind(7, row.input_tokens).bind(8, row.cached_input_tokens).bind(9, row.output_tokens)
      .bind(10, row.cost_usd).bind(11, row.wall_seconds).bind(12, row.plan.key).run();
  transaction.commit();
}

void Store::fail_run(const std::string& key, const std::string& error, const std::string& time) {
  std::lock_guard lock(mutex_);
  sql::Transaction transaction(db_);
  db_.prepare("UPDATE run SET state = 'failed', error = ?, finished = ? WHERE key = ?").bind(1, error).bind(2, time).bind(3, key).run();
  transaction.commit();
}

void Store::record_turns_locked(const std::string& key, const std::vector<TurnUsage>& turns) {
  auto s = db_.prepare("INSERT OR IGNORE INTO turn_usage (key, seq, turn, input_tokens, cached_input_tokens, "
                       "cache_write_input_tokens, output_tokens, cost_usd, latency_seconds, time) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (const auto& t : turns)
    s.bind(1, key).bind(2, t.seq).bind(3, t.turn).bind(4, t.input_tokens).bind(5, t.cached_input_tokens)
        .bind(6, t.cache_write_input_tokens).bind(7, t.output_tokens).bind(8, t.cost_usd).bind(9, t.latency_seconds)
        .bind(10, t.time).run();
}

void Store::record_turns(const std::string& key, const std::vector<TurnUsage>& turns) {
  if (turns.empty()) return;
  std::lock_guard lock(mutex_);
  sql::Transaction transaction(db_);
  record_turns_locked(key, turns);
  transaction.commit();
}

std::vector<TurnUsage> Store::turns(const std::string& key) {
  std::lock_guard lock(mutex_);
  return turns_locked(key);
}

std::vector<TurnUsage> Store::turns_locked(const std::string& key) {
  auto s = db_.prepare("SELECT seq, turn, input_tokens, cached_input_tokens, cache_write_input_tokens, output_tokens, "
                       "cost_usd, latency_seconds, time FROM turn_usage WHERE key = ? ORDER BY seq");
  s.bind(1, key);
  std::vector<TurnUsage> out;
  while (s.step())
    out.push_back({static_cast<int>(s.integer(0)), static_cast<int>(s.integer(1)), s.integer(2), s.integer(3), s.integer(4),
                   s.integer(5), s.real(6), s.real(7), s.text(8)});
  return out;
}

UsageTotals Store::usage_totals() {
  std::lock_guard lock(mutex_);
  auto s = db_.prepare("SELECT COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(cached_input_tokens), 0), "
                       "COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cost_usd), 0) FROM turn_usage");
  s.step();
  return {s.integer(0), s.integer(1), s.integer(2), s.integer(3), s.real(4)};
}

int64_t Store::put_evaluation_locked(const EvaluationRow& e) {
  db_.prepare("DELETE FROM evaluation WHERE key = ? AND kind = ?").bind(1, e.key).bind(2, std::string(name_of(e.kind))).run();
  db_.prepare("INSERT INTO evaluation (key, task, kind, solution, seed, device, created, passed) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
      .bind(1, e.key).bind(2, e.task).bind(3, std::string(name_of(e.kind))).bind(4, e.solution).bind(5, e.seed)
      .bind(6, e.device).bind(7, e.created).bind(8, e.passed).run();
  const int64_t id = db_.last_insert_id();
  auto t = db_.prepare("INSERT INTO trace (evaluation_id, workload, status, median_ms, ci_low_ms, ci_high_ms, "
                       "baseline_median_ms, baseline_ci_low_ms, baseline_ci_high_ms, speedup, sol_fraction, throttled, "
                       "clock_reasons, json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (const auto& r : e.traces)
    t.bind(1, id).bind(2, r.workload).bind(3, r.status).bind(4, r.median_ms).bind(5, r.ci_low_ms).bind(6, r.ci_high_ms)
        .bind(7, r.baseline_median_ms).bind(8, r.baseline_ci_low_ms).bind(9, r.baseline_ci_high_ms).bind(10, r.speedup)
        .bind(11, r.sol_fraction).bind(12, r.throttled).bind(13, r.clock_reasons).bind(14, r.json).run();
  return id;
}

int64_t Store::put_evaluation(const EvaluationRow& evaluation) {
  std::lock_guard lock(mutex_);
  sql::Transaction transaction(db_);
  const auto id = put_evaluation_locked(evaluation);
  transaction.commit();
  return id;
}

bool Store::has_evaluation(const std::string& key, EvaluationKind kind) {
  std::lock_guard lock(mutex_);
  auto s = db_.prepare("SELECT 1 FROM evaluation WHERE key = ? AND kind = ?");
  s.bind(1, key).bind(2, std::string(name_of(kind)));
  return s.step();
}

std::vector<EvaluationRow> Store::evaluations() {
  std::lock_guard lock(mutex_);
  return evaluations_locked();
}

std::vector<EvaluationRow> Store::evaluations_locked() {
  std::vector<EvaluationRow> out;
  auto e = db_.prepare("SELECT id, key, task, kind, solution, seed, device, created, passed FROM evaluation ORDER BY id");
  while (e.step())
    out.push_back({e.integer(0), e.text(1), e.text(2), parse_evaluation_kind(e.text(3)), e.text(4),
                   static_cast<uint64_t>(e.integer(5)), e.text(6), e.text(7), e.integer(8) != 0, {}});
  auto t = db_.prepare("SELECT workload, status, median_ms, ci_low_ms, ci_high_ms, baseline_median_ms, baseline_ci_low_ms, "
                       "baseline_ci_high_ms, speedup, sol_fraction, throttled, clock_reasons, json FROM trace "
                       "WHERE evaluation_id = ? ORDER BY rowid");
  for (auto& row : out) {
    t.bind(1, row.id);
    while (t.step()) {
      TraceRow r;
      r.workload = t.text(0);
      r.status = t.text(1);
      r.median_ms = t.optional_real(2);
      r.ci_low_ms = t.optional_real(3);
      r.ci_high_ms = t.optional_real(4);
      r.baseline_median_ms = t.optional_real(5);
      r.baseline_ci_low_ms = t.optional_real(6);
      r.baseline_ci_high_ms = t.optional_real(7);
      r.speedup = t.optional_real(8);
      r.sol_fraction = t.optional_real(9);
      if (auto v = t.optional_integer(10)) r.throttled = *v != 0;
      r.clock_reasons = t.text(11);
      r.json = t.text(12);
      row.traces.push_back(std::move(r));
    }
    t.reset();
  }
  return out;
}

void Store::put_judge_score(const JudgeScore& j) {
  std::lock_guard lock(mutex_);
  sql::Transaction transaction(db_);
  db_.prepare("INSERT OR REPLACE INTO judge_score (key, kind, judge, score, max_score, items, created, audit) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
      .bind(1, j.key).bind(2, j.kind).bind(3, j.judge).bind(4, j.score).bind(5, j.max_score).bind(6, j.items)
      .bind(7, j.created).bind(8, j.audit).run();
  transaction.commit();
}

std::vector<JudgeScore> Store::judge_scores() {
  std::lock_guard lock(mutex_);
  return judge_scores_locked();
}

std::vector<JudgeScore> Store::judge_scores_locked() {
  auto s = db_.prepare(
      "SELECT key, kind, judge, score, max_score, items, created, audit FROM judge_score ORDER BY key, kind, judge");
  std::vector<JudgeScore> out;
  while (s.step())
    out.push_back({s.text(0), s.text(1), s.text(2), s.real(3), s.optional_real(4), s.text(5), s.text(6), s.text(7)});
  return out;
}

void Store::set_shard(const Shard& shard) {
  std::lock_guard lock(mutex_);
  sql::Transaction transaction(db_);
  const auto held = shard_locked();
  if (held && *held == shard) return;
  if (held)
    fail("{}: the store of {}, not of {}", db_.file(), name_of(*held), name_of(shard));
  if (shard.whole()) return;
  if (campaign_locked())
    fail("{}: the store of a whole campaign (or one merged from shards), not of {}: a shard writes its own store",
         db_.file(), name_of(shard));
  db_.prepare("INSERT INTO shard (id, shard, shards) VALUES (1, ?, ?)").bind(1, shard.index).bind(2, shard.count).run();
  transaction.commit();
}

std::optional<Shard> Store::shard() {
  std::lock_guard lock(mutex_);
  return shard_locked();
}

std::optional<Shard> Store::shard_locked() {
  auto s = db_.prepare("SELECT shard, shards FROM shard WHERE id = 1");
  if (!s.step()) return std::nullopt;
  return Shard{static_cast<int>(s.integer(0)), static_cast<int>(s.integer(1))};
}

}  // namespace d2k::campaign
