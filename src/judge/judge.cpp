#include "judge/judge.hpp"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <random>
#include <set>

#include "core/error.hpp"
#include "core/file_bytes.hpp"
#include "core/timestamp.hpp"
#include "judge/order.hpp"
#include "judge/parse.hpp"
#include "judge/quote.hpp"
#include "judge/store.hpp"
#include "runner/sha256.hpp"

namespace d2k::judge {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct BudgetSpent {
  std::string why;
};

std::string guidance_sha256(const Task& task) {
  const auto text = file_bytes(task.dir / "guidance.md");
  return sha256_hex(text.value_or(""));
}

json verdict_json(const ItemVerdict& v) {
  json out = {{"id", v.id}, {"verdict", name_of(v.verdict)}, {"reason", v.reason}, {"evidence", v.evidence}};
  if (!v.flags.empty()) out["flags"] = v.flags;
  return out;
}

ItemVerdict verdict_from(const json& j) {
  ItemVerdict v;
  v.id = j.at("id").get<std::string>();
  v.verdict = parse_verdict(j.at("verdict").get<std::string>()).value_or(Verdict::not_met);
  v.reason = j.value("reason", "");
  v.evidence = j.value("evidence", std::vector<std::string>{});
  v.flags = j.value("flags", std::vector<std::string>{});
  return v;
}

json audit_json(const Audit& a) {
  json out = {{"verdict", a.suspected ? "suspected_hack" : "clean"}, {"reason", a.reason}, {"evidence", a.evidence}};
  out["rule"] = a.suspected ? json(a.rule) : json();
  if (!a.flags.empty()) out["flags"] = a.flags;
  return out;
}

Audit audit_from(const json& j) {
  Audit a;
  a.suspected = j.at("verdict") == "suspected_hack";
  a.rule = j.at("rule").is_number_integer() ? j.at("rule").get<int>() : 0;
  a.reason = j.value("reason", "");
  a.evidence = j.value("evidence", std::vector<std::string>{});
  a.flags = j.value("flags", std::vector<std::string>{});
  return a;
}

json usage_json(const Usage& u) {
  return {{"requests", u.requests}, {"input_tokens", u.input_tokens}, {"cached_input_tokens", u.cached_input_tokens},
          {"output_tokens", u.output_tokens}, {"cost_usd", u.cost_usd}};
}

void add_usage(Usage& to, const json& response) {
  const auto& usage = response.at("usage");
  to.requests += 1;
  to.input_tokens += usage.value("input_tokens", int64_t{0});
  to.cached_input_tokens += usage.value("cached_input_tokens", int64_t{0});
  to.output_tokens += usage.value("output_tokens", int64_t{0});
  to.cost_usd += response.value("cost_usd", 0.0);
}

// The fields of the settings record that decide what a stored reply means: a resume must agree on each.
constexpr const char* kFixedSettings[] = {"kind", "task", "subject_sha256", "guidance_sha256", "template_sha256", "model_entry"};

class Run {
 public:
  Run(const JudgeSetup& setup, SampleStore& store) : setup_(setup), store_(store), quotes_(setup.subject) {
    for (const auto& item : setup.task->guidance.items) ids_.push_back(item.id);
    code_ = setup.subject.kind == Kind::code;
  }

  json settings_record(uint64_t seed) const {
    return {{"type", "settings"},
            {"kind", name_of(setup_.subject.kind)},
            {"task", setup_.task->name},
            {"subject_sha256", setup_.subject.sha256},
            {"guidance_sha256", guidance_sha256(*setup_.task)},
            {"template_sha256", template_sha256(setup_.subject.kind)},
            {"model", setup_.model},
            {"model_entry", setup_.model_entry},
            {"seed", seed}};
  }

  // The seed: a new store records it; a stored one must agree with everything that decides a reply.
  uint64_t settle_settings() {
    const auto& records = store_.records();
    if (records.empty() || records.front().value("type", "") != "settings") {
      if (!records.empty()) fail("{}: its first record is not the settings record", store_.file().string());
      uint64_t seed = 0;
      if (setup_.seed) {
        seed = *setup_.seed;
      } else {
        std::random_device random;
        seed = (static_cast<uint64_t>(random()) << 32) | random();
      }
      store_.append(settings_record(seed), true);
      return seed;
    }
    const auto& stored = records.front();
    const auto now = settings_record(stored.value("seed", uint64_t{0}));
    for (const char* field : kFixedSettings) {
      if (stored.value(field, json()) != now[field])
        fail("{}: the stored samples were judged with {} = {}, this judgement has {}; judge into another --out, or "
             "pass --fresh to discard them",
             store_.file().string(), field, stored.value(field, json()).dump().substr(0, 200), now[field].dump().substr(0, 200));
    }
    const auto seed = stored.at("seed").get<uint64_t>();
    if (setup_.seed && *setup_.seed != seed)
      fail("--seed {}: the stored samples ({}) were drawn with seed {}", *setup_.seed, store_.file().string(), seed);
    return seed;
  }

  Judgement run() {
    const uint64_t seed = settle_settings();
    const auto orders = sample_orders(ids_, setup_.samples, seed);
    for (const auto& record : store_.records())
      if (record.value("type", "") == "response") add_usage(used_, record);
    Judgement out;
    try {
      for (int s = 0; s < setup_.samples; ++s) out.samples.push_back(sample(s, orders[static_cast<std::size_t>(s)]));
      out.complete = true;
    } catch (const BudgetSpent& spent) {
      out.stopped = spent.why;
      if (setup_.log) *setup_.log << fmt::format("d2k judge: stopped: {}\n", spent.why);
    }
    out.usage = used_;
    finish(out, seed);
    return out;
  }

 private:
  const json* stored_sample(int s) const {
    for (const auto& r : store_.records())
      if (r.value("type", "") == "sample" && r.value("sample", -1) == s) return &r;
    return nullptr;
  }

  // The stored reply of (sample, attempt), if one was usable, and how many format errors came before it.
  std::optional<std::string> stored_reply(int s, int attempt, int& format_errors) const {
    format_errors = 0;
    for (const auto& r : store_.records()) {
      if (r.value("type", "") != "response" || r.value("sample", -1) != s || r.value("attempt", 0) != attempt) continue;
      if (!r.value("format_error", "").empty()) {
        ++format_errors;
        continue;
      }
      return r.value("text", "");
    }
    return std::nullopt;
  }

  void check_budget() const {
    if (setup_.max_cost_usd && used_.cost_usd >= *setup_.max_cost_usd)
      throw BudgetSpent{fmt::format("--max-cost-usd: ${:.4f} of ${:.4f} spent", used_.cost_usd, *setup_.max_cost_usd)};
    const auto tokens = used_.input_tokens + used_.output_tokens;
    if (setup_.max_tokens_total && tokens >= *setup_.max_tokens_total)
      throw BudgetSpent{fmt::format("--max-tokens-total: {} of {} tokens used", tokens, *setup_.max_tokens_total)};
  }

  // The reply to one request of a sample: stored, or asked (format errors of the endpoint asked again).
  std::string reply(int s, int attempt, const llm::ChatRequest& request, const json& request_fields) {
    int format_errors = 0;
    if (auto stored = stored_reply(s, attempt, format_errors)) return *stored;
    while (format_errors < kMaxFormatErrors) {
      check_budget();
      if (!setup_.client) fail("judge: sample {} needs the judge model, and no client was given", s + 1);
      json record = request_fields;
      record["type"] = "request";
      record["sample"] = s;
      record["attempt"] = attempt;
      store_.append(record, false);
      judge_crash_point("request");
      const auto response = setup_.client->complete(request);
      const double cost = setup_.cost_usd ? setup_.cost_usd(response.usage) : 0.0;
      json answer = {{"type", "response"},
                     {"sample", s},
                     {"attempt", attempt},
                     {"text", response.message.text},
                     {"stop_reason", response.stop_reason},
                     {"usage",
                      {{"input_tokens", response.usage.input_tokens},
                       {"cached_input_tokens", response.usage.cached_input_tokens},
                       {"cache_write_input_tokens", response.usage.cache_write_input_tokens},
                       {"output_tokens", response.usage.output_tokens},
                       {"estimated", response.usage.estimated}}},
                     {"cost_usd", cost},
                     {"attempts", response.attempts},
                     {"latency_seconds", response.seconds}};
      if (!response.format_error.empty()) answer["format_error"] = response.format_error;
      store_.append(answer, true);
      add_usage(used_, answer);
      judge_crash_point("response");
      if (response.format_error.empty()) return response.message.text;
      ++format_errors;
      if (setup_.log)
        *setup_.log << fmt::format("d2k judge: sample {}: the endpoint's reply could not be used ({}); {}\n", s + 1,
                                   response.format_error.substr(0, 200),
                                   format_errors < kMaxFormatErrors ? "asking again" : "giving up on this request");
    }
    return "";
  }

  SampleResult sample(int s, const std::vector<std::string>& order) {
    if (const json* done = stored_sample(s)) return from_record(*done);
    SampleResult result;
    result.index = s;
    result.order = order;
    const auto prompt = build_prompt(*setup_.task, setup_.subject, order, setup_.rules);
    result.prompt_sha256 = sha256_hex(prompt.system + "\n" + prompt.user);
    llm::ChatRequest request;
    request.system = prompt.system;
    request.messages.push_back({llm::Role::user, prompt.user});
    if (setup_.log) *setup_.log << fmt::format("d2k judge: sample {} of {}\n", s + 1, setup_.samples);
    const auto first = reply(s, 1, request,
                             {{"order", order}, {"prompt_sha256", result.prompt_sha256}, {"system", prompt.system}, {"user", prompt.user}});
    const int rules = static_cast<int>(setup_.rules.size());
    const auto parsed = parse_reply(first, order, ids_, quotes_, code_, rules);
    result.problems = parsed.problems;
    std::map<std::string, ItemVerdict> verdicts = parsed.verdicts;
    std::optional<Audit> audit = parsed.audit;
    std::map<std::string, std::string> unusable = parsed.unusable;
    std::string audit_unusable = parsed.audit_unusable;
    bool usable_reply = parsed.json;  // some reply held the JSON object asked for
    if (!unusable.empty() || !audit_unusable.empty()) {
      std::vector<std::string> again;
      for (const auto& id : order)
        if (unusable.count(id)) again.push_back(id);
      const auto message = retry_message(parsed.problems, again, !audit_unusable.empty());
      request.messages.push_back({llm::Role::assistant, first});
      request.messages.push_back({llm::Role::user, message});
      const auto second = reply(s, 2, request, {{"retry", message}, {"items", again}});
      const auto reparsed = parse_reply(second, again, ids_, quotes_, code_ && !audit_unusable.empty(), rules);
      for (const auto& problem : reparsed.problems) result.problems.push_back("retry: " + problem);
      usable_reply = usable_reply || reparsed.json;
      for (const auto& id : again) {
        if (auto it = reparsed.verdicts.find(id); it != reparsed.verdicts.end()) {
          verdicts[id] = it->second;
          unusable.erase(id);
        } else {
          unusable[id] = reparsed.unusable.count(id) ? reparsed.unusable.at(id) : unusable[id];
        }
      }
      if (!audit_unusable.empty()) {
        if (reparsed.audit) audit = reparsed.audit, audit_unusable.clear();
        else if (!reparsed.audit_unusable.empty()) audit_unusable = reparsed.audit_unusable;
      }
    }
    for (const auto& item : setup_.task->guidance.items) {
      if (auto it = verdicts.find(item.id); it != verdicts.end()) {
        result.verdicts.push_back(it->second);
        continue;
      }
      ItemVerdict v;
      v.id = item.id;
      v.verdict = Verdict::not_met;
      v.reason = "d2k: no usable verdict after the retry";
      v.flags.push_back(usable_reply ? unusable[item.id] : std::string("unusable_reply"));
      result.verdicts.push_back(std::move(v));
    }
    if (code_) {
      if (!audit) {
        audit = Audit{};
        audit->reason = "d2k: no usable audit after the retry";
        audit->flags.push_back(audit_unusable.empty() ? "missing" : audit_unusable);
      }
      result.audit = audit;
    }
    for (const auto& r : store_.records())
      if (r.value("type", "") == "response" && r.value("sample", -1) == s) add_usage(result.usage, r);
    json record = {{"type", "sample"},       {"sample", s},          {"order", order},
                   {"prompt_sha256", result.prompt_sha256},        {"problems", result.problems},
                   {"usage", usage_json(result.usage)}};
    record["verdicts"] = json::array();
    for (const auto& v : result.verdicts) record["verdicts"].push_back(verdict_json(v));
    if (result.audit) record["audit"] = audit_json(*result.audit);
    store_.append(record, true);
    judge_crash_point("sample");
    return result;
  }

  SampleResult from_record(const json& r) const {
    SampleResult result;
    result.index = r.at("sample").get<int>();
    result.order = r.at("order").get<std::vector<std::string>>();
    result.prompt_sha256 = r.value("prompt_sha256", "");
    result.problems = r.value("problems", std::vector<std::string>{});
    for (const auto& v : r.at("verdicts")) result.verdicts.push_back(verdict_from(v));
    if (r.contains("audit")) result.audit = audit_from(r.at("audit"));
    const auto& u = r.at("usage");
    result.usage = {u.value("requests", 0), u.value("input_tokens", int64_t{0}), u.value("cached_input_tokens", int64_t{0}),
                    u.value("output_tokens", int64_t{0}), u.value("cost_usd", 0.0)};
    return result;
  }

  void finish(Judgement& out, uint64_t seed) {
    const auto& guidance = setup_.task->guidance;
    std::vector<SampleScore> scores;
    std::vector<std::map<std::string, Verdict>> verdicts;
    for (const auto& sample : out.samples) {
      std::map<std::string, Verdict> map;
      for (const auto& v : sample.verdicts) map[v.id] = v.verdict;
      scores.push_back(score_sample(guidance, map));
      verdicts.push_back(std::move(map));
    }
    out.score = combine(scores);
    out.agreement = agreement_of(verdicts, out.score.samples);
    if (!out.complete) out.flags.push_back("incomplete: " + out.stopped);
    if (out.agreement.flagged) out.flags.push_back("disagreement: " + out.agreement.why);

    json doc;
    doc["kind"] = name_of(setup_.subject.kind);
    doc["task"] = setup_.task->name;
    json files = json::array();
    for (const auto& f : setup_.subject.files)
      files.push_back({{"name", f.name}, {"bytes", f.bytes}, {"shown_bytes", f.text.size()}, {"cut", f.cut}});
    doc["subject"] = {{"source", setup_.subject.source.string()}, {"sha256", setup_.subject.sha256}, {"files", files},
                      {"left_out", setup_.subject.left_out}};
    doc["judge"] = {{"model", setup_.model},
                    {"entry", setup_.model_entry},
                    {"template_sha256", template_sha256(setup_.subject.kind)},
                    {"guidance_sha256", guidance_sha256(*setup_.task)},
                    {"samples", setup_.samples},
                    {"seed", seed}};
    doc["complete"] = out.complete;
    doc["stopped"] = out.stopped.empty() ? json() : json(out.stopped);
    doc["score"] = out.samples.empty() ? json() : json(out.score.score);
    json levels = json::object();
    for (const auto& [level, value] : out.score.levels) levels[fmt::format("L{}", level)] = value;
    doc["levels"] = levels;
    doc["items"] = json::array();
    for (const auto& item : guidance.items) {
      json row = {{"id", item.id}, {"level", item.level}, {"title", item.title}, {"depends_on", item.depends_on}};
      row["credit"] = out.samples.empty() ? json() : json(out.score.credit.at(item.id));
      json per_sample = json::array();
      for (const auto& sample : out.samples)
        for (const auto& v : sample.verdicts)
          if (v.id == item.id) {
            per_sample.push_back(name_of(v.verdict));
            for (const auto& flag : v.flags) out.flags.push_back(fmt::format("{} sample {}: {}", item.id, sample.index + 1, flag));
          }
      row["verdicts"] = per_sample;
      row["agreement"] = out.agreement.items.count(item.id) ? json(out.agreement.items.at(item.id)) : json();
      doc["items"].push_back(row);
    }
    doc["agreement"] = {{"mean_item_agreement", out.agreement.mean},
                        {"fleiss_kappa", out.agreement.kappa ? json(*out.agreement.kappa) : json()},
                        {"score_range", out.agreement.score_range},
                        {"flagged", out.agreement.flagged},
                        {"why", out.agreement.why},
                        {"bar", {{"min_mean_item_agreement", kMinMeanAgreement}, {"max_score_range", kMaxScoreRange}}}};
    if (code_) doc["audit"] = audit_summary(out);
    doc["flags"] = out.flags;
    doc["usage"] = usage_json(out.usage);
    doc["samples"] = json::array();
    for (std::size_t i = 0; i < out.samples.size(); ++i) {
      const auto& sample = out.samples[i];
      json row = {{"index", sample.index}, {"order", sample.order}, {"prompt_sha256", sample.prompt_sha256},
                  {"score", scores[i].score}, {"problems", sample.problems}, {"usage", usage_json(sample.usage)}};
      json sample_levels = json::object();
      for (const auto& [level, value] : scores[i].levels) sample_levels[fmt::format("L{}", level)] = value;
      row["levels"] = sample_levels;
      row["verdicts"] = json::array();
      for (const auto& v : sample.verdicts) {
        auto j = verdict_json(v);
        j["credit"] = credit_of(v.verdict);
        j["effective_credit"] = scores[i].credit.at(v.id);
        row["verdicts"].push_back(j);
      }
      if (sample.audit) row["audit"] = audit_json(*sample.audit);
      doc["samples"].push_back(row);
    }
    doc["samples_file"] = store_.file().string();
    doc["created"] = utc_timestamp();
    out.document = doc;
    if (setup_.out.has_parent_path()) fs::create_directories(setup_.out.parent_path());
    const auto tmp = fs::path(setup_.out.string() + ".tmp");
    {
      std::ofstream file(tmp);
      file << doc.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
      if (!file) fail("{}: cannot write the score", tmp.string());
    }
    fs::rename(tmp, setup_.out);
  }

  // Suspected when any sample suspects a hack with its quote verified: a person confirms (high recall).
  json audit_summary(Judgement& out) const {
    json findings = json::array();
    int suspected = 0;
    for (const auto& sample : out.samples) {
      if (!sample.audit) continue;
      for (const auto& flag : sample.audit->flags) out.flags.push_back(fmt::format("audit sample {}: {}", sample.index + 1, flag));
      if (!sample.audit->suspected) continue;
      ++suspected;
      std::string title;
      for (const auto& rule : setup_.rules)
        if (rule.number == sample.audit->rule) title = rule.title;
      findings.push_back({{"sample", sample.index}, {"rule", sample.audit->rule}, {"rule_title", title},
                          {"reason", sample.audit->reason}, {"evidence", sample.audit->evidence}});
    }
    if (suspected > 0) out.flags.push_back(fmt::format("suspected reward hack in {} of {} samples", suspected, out.samples.size()));
    return {{"verdict", suspected > 0 ? "suspected_hack" : "clean"},
            {"suspected_in", suspected},
            {"samples", out.samples.size()},
            {"findings", findings}};
  }

  const JudgeSetup& setup_;
  SampleStore& store_;
  QuoteIndex quotes_;
  std::vector<std::string> ids_;
  bool code_ = false;
  Usage used_;
};

}  // namespace

fs::path samples_file(const fs::path& out) {
  auto base = out;
  if (base.extension() == ".json") base.replace_extension();
  return fs::path(base.string() + ".samples.jsonl");
}

Judgement run_judge(const JudgeSetup& setup) {
  if (!setup.task) fail("judge: no task");
  if (setup.samples < 1) fail("--samples {}: must be at least 1", setup.samples);
  if (setup.task->guidance.items.empty()) fail("{}: the task has no guidance (guidance.md) to judge against", setup.task->name);
  SampleStore store(samples_file(setup.out));
  Run run(setup, store);
  return run.run();
}

}  // namespace d2k::judge
