#include "campaign/ingest.hpp"

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/summary.hpp"

namespace d2k::campaign {
namespace {

std::optional<TurnUsage> usage_of(const std::string& line, int seq) {
  const auto r = nlohmann::json::parse(line, nullptr, false);
  if (r.is_discarded() || !r.is_object() || r.value("type", "") != "response") return std::nullopt;
  TurnUsage t;
  t.seq = r.value("seq", seq);
  t.turn = r.value("turn", 0);
  if (r.contains("usage") && r["usage"].is_object()) {
    const auto& u = r["usage"];
    t.input_tokens = u.value("input_tokens", int64_t{0});
    t.cached_input_tokens = u.value("cached_input_tokens", int64_t{0});
    t.cache_write_input_tokens = u.value("cache_write_input_tokens", int64_t{0});
    t.output_tokens = u.value("output_tokens", int64_t{0});
  }
  t.cost_usd = r.value("cost_usd", 0.0);
  t.latency_seconds = r.value("latency_seconds", 0.0);
  t.time = r.value("time", "");
  return t;
}

}  // namespace

std::vector<TurnUsage> TranscriptTail::read_new() {
  std::vector<TurnUsage> out;
  std::ifstream in(file_, std::ios::binary);
  if (!in) return out;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline yet: the line is still being written
    offset_ += line.size() + 1;
    if (auto t = usage_of(line, seq_)) out.push_back(*t);
    ++seq_;
  }
  return out;
}

std::vector<TurnUsage> transcript_usage(const std::filesystem::path& transcript) {
  TranscriptTail tail(transcript);
  return tail.read_new();
}

RunRow finished_row(const RunRow& planned, const agent::RunResult& result, const std::string& time) {
  RunRow row = planned;
  row.state = RunState::finished;
  row.finished = time;
  row.status = std::string(agent::name_of(result.status));
  row.reason = result.reason;
  row.passed = result.passed;
  row.solution = result.solution;
  row.turns = result.turns;
  row.input_tokens = result.used.input_tokens;
  row.cached_input_tokens = result.used.cached_input_tokens;
  row.output_tokens = result.used.output_tokens;
  row.cost_usd = result.used.cost_usd;
  row.wall_seconds = result.used.wall_seconds;
  return row;
}

EvaluationRow evaluation_of(const std::string& key, const std::string& task, EvaluationKind kind,
                            const std::string& solution, uint64_t seed, const std::string& device,
                            const std::vector<Trace>& traces, bool passed, const std::string& time) {
  EvaluationRow e;
  e.key = key;
  e.task = task;
  e.kind = kind;
  e.solution = solution;
  e.seed = seed;
  e.device = device;
  e.created = time;
  e.passed = passed;
  for (const auto& t : traces) e.traces.push_back(trace_row(t));
  return e;
}

EvaluationRow final_evaluation(const PlannedRun& run, const agent::RunResult& result, const std::string& device,
                               const std::string& time) {
  const uint64_t seed = result.traces.empty() ? 0 : result.traces.front().seed;
  return evaluation_of(run.key, run.task, EvaluationKind::final, result.solution, seed, device, result.traces,
                       result.passed, time);
}

}  // namespace d2k::campaign
