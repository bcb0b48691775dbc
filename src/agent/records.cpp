#include "agent/records.hpp"

#include <fmt/format.h>

#include <map>

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/text.hpp"

namespace d2k::agent {

std::string_view name_of(RunStatus status) {
  switch (status) {
    case RunStatus::submitted: return "submitted";
    case RunStatus::budget: return "budget";
    case RunStatus::context_overflow: return "context_overflow";
    case RunStatus::api_error: return "api_error";
    case RunStatus::format_errors: return "format_errors";
    case RunStatus::harness_error: return "harness_error";
  }
  return "?";
}

std::optional<RunStatus> parse_run_status(std::string_view name) {
  for (auto s : {RunStatus::submitted, RunStatus::budget, RunStatus::context_overflow, RunStatus::api_error,
                 RunStatus::format_errors, RunStatus::harness_error})
    if (name_of(s) == name) return s;
  return std::nullopt;
}

std::optional<Language> parse_run_language(std::string_view name) {
  if (name == "cuda") return Language::cuda;
  if (name == "triton") return Language::triton;
  return std::nullopt;
}

Language default_run_language(Device device) {
  return device == Device::cuda ? Language::triton : Language::cuda;
}

std::optional<std::string> language_refusal(Language language, Device device) {
  if (language == Language::triton && device != Device::cuda)
    return fmt::format("--language triton with --device {}: the {} device has no Triton backend (Triton solutions run "
                       "on the cuda device; on the {} device use --language cuda, which writes host C++)",
                       name_of(device), name_of(device), name_of(device));
  return std::nullopt;
}

bool solution_fits(Language language, Language solution) {
  if (language == Language::triton) return solution == Language::triton;
  return solution != Language::triton;
}

namespace {
template <typename T>
nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}
template <typename T>
std::optional<T> optional_from(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<T>();
}
}  // namespace

void to_json(nlohmann::json& j, const SettingChange& c) {
  j = {{"option", c.option}, {"from", c.from}, {"to", c.to}, {"time", c.time}};
}

void from_json(const nlohmann::json& j, SettingChange& c) {
  c.option = j.at("option").get<std::string>();
  c.from = j.at("from");
  c.to = j.at("to");
  c.time = j.at("time").get<std::string>();
}

void to_json(nlohmann::json& j, const RunSettings& s) {
  j = {{"task", s.task},
       {"model", s.model},
       {"models_file", s.models_file},
       {"condition", std::string(name_of(s.condition))},
       {"language", std::string(name_of(s.language))},
       {"budget", {{"max_turns", s.budget.max_turns},
                   {"max_tokens_total", optional_json(s.budget.max_tokens_total)},
                   {"max_cost_usd", optional_json(s.budget.max_cost_usd)},
                   {"max_wall_seconds", optional_json(s.budget.max_wall_seconds)}}},
       {"device", s.device},
       {"device_name", s.device_name},
       {"seed", s.seed},
       {"workloads", s.workloads},
       {"timing", {{"max_seconds", s.timing_max_seconds}, {"min_samples", s.timing_min_samples}, {"warmup", s.timing_warmup}}},
       {"worker_timeout_seconds", s.worker_timeout_seconds},
       {"baseline", s.baseline},
       {"max_format_errors", s.max_format_errors},
       {"root", s.root},
       {"created", s.created},
       {"sandbox", s.sandbox},
       {"model_entry", s.model_entry},
       {"changes", s.changes}};
}

void from_json(const nlohmann::json& j, RunSettings& s) {
  try {
    s.task = j.at("task").get<std::string>();
    s.model = j.at("model").get<std::string>();
    s.models_file = j.at("models_file").get<std::string>();
    const auto condition = j.at("condition").get<std::string>();
    auto parsed = parse_condition(condition);
    if (!parsed) fail("condition: unknown condition '{}'", condition);
    s.condition = *parsed;
    const auto language = j.value("language", std::string("cuda"));
    auto parsed_language = parse_run_language(language);
    if (!parsed_language) fail("language: unknown language '{}' (cuda, triton)", language);
    s.language = *parsed_language;
    const auto& b = j.at("budget");
    s.budget.max_turns = b.at("max_turns").get<int>();
    s.budget.max_tokens_total = optional_from<int64_t>(b, "max_tokens_total");
    s.budget.max_cost_usd = optional_from<double>(b, "max_cost_usd");
    s.budget.max_wall_seconds = optional_from<double>(b, "max_wall_seconds");
    s.device = j.at("device").get<Device>();
    s.device_name = j.value("device_name", "");
    s.seed = j.at("seed").get<uint64_t>();
    s.workloads = j.at("workloads").get<std::vector<std::string>>();
    const auto& t = j.at("timing");
    s.timing_max_seconds = t.at("max_seconds").get<double>();
    s.timing_min_samples = t.at("min_samples").get<int>();
    s.timing_warmup = t.at("warmup").get<int>();
    s.worker_timeout_seconds = j.at("worker_timeout_seconds").get<double>();
    s.baseline = j.at("baseline").get<bool>();
    s.max_format_errors = j.at("max_format_errors").get<int>();
    s.root = j.at("root").get<std::string>();
    s.created = j.value("created", "");
    s.sandbox = j.value("sandbox", "");
    s.model_entry = j.value("model_entry", nlohmann::json());
    s.changes = j.value("changes", std::vector<SettingChange>{});
  } catch (const nlohmann::json::exception& e) {
    fail("run.json: {}", e.what());
  }
}

void to_json(nlohmann::json& j, const Candidate& c) {
  j = {{"dir", c.dir}, {"call_index", c.call_index}, {"time_geomean_ms", optional_json(c.time_geomean_ms)}};
}

void from_json(const nlohmann::json& j, Candidate& c) {
  c.dir = j.at("dir").get<std::string>();
  c.call_index = j.at("call_index").get<int>();
  c.time_geomean_ms = optional_from<double>(j, "time_geomean_ms");
}

void to_json(nlohmann::json& j, const Used& u) {
  j = {{"turns", u.turns},
       {"input_tokens", u.input_tokens},
       {"cached_input_tokens", u.cached_input_tokens},
       {"cache_write_input_tokens", u.cache_write_input_tokens},
       {"output_tokens", u.output_tokens},
       {"cost_usd", u.cost_usd},
       {"wall_seconds", u.wall_seconds},
       {"estimated_responses", u.estimated_responses}};
}

}  // namespace d2k::agent

namespace d2k::llm {

void to_json(nlohmann::json& j, const ToolCall& c) {
  j = {{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}};
  if (c.original_id) j["original_id"] = *c.original_id;
}

void from_json(const nlohmann::json& j, ToolCall& c) {
  c.id = j.at("id").get<std::string>();
  c.name = j.at("name").get<std::string>();
  c.arguments = j.at("arguments").get<std::string>();
  if (j.contains("original_id")) c.original_id = j.at("original_id").get<std::string>();
}

// Only what the type has: text (and signature) for thinking, data for redacted_thinking.
void to_json(nlohmann::json& j, const Reasoning& r) {
  j = {{"type", r.type}};
  if (!r.text.empty() || r.data.empty()) j["text"] = r.text;
  if (!r.signature.empty()) j["signature"] = r.signature;
  if (!r.data.empty()) j["data"] = r.data;
  if (r.after_calls != 0) j["after_calls"] = r.after_calls;
}

void from_json(const nlohmann::json& j, Reasoning& r) {
  r.type = j.at("type").get<std::string>();
  r.text = j.value("text", "");
  r.signature = j.value("signature", "");
  r.data = j.value("data", "");
  r.after_calls = j.value("after_calls", 0);
}

void to_json(nlohmann::json& j, const ToolSpec& t) {
  j = {{"name", t.name}, {"description", t.description}, {"parameters", t.parameters}};
}

void from_json(const nlohmann::json& j, ToolSpec& t) {
  t.name = j.at("name").get<std::string>();
  t.description = j.at("description").get<std::string>();
  t.parameters = j.at("parameters");
}

}  // namespace d2k::llm

namespace d2k::agent::record {

json prompt(const std::string& system, const std::string& user, const std::vector<llm::ToolSpec>& tools) {
  return {{"type", "prompt"}, {"system", system}, {"user", user}, {"tools", tools}};
}

json request(int turn, std::size_t messages) { return {{"type", "request"}, {"turn", turn}, {"messages", messages}}; }

json response(int turn, const llm::ChatResponse& r, double cost_usd) {
  json usage = {{"input_tokens", r.usage.input_tokens},
                {"cached_input_tokens", r.usage.cached_input_tokens},
                {"cache_write_input_tokens", r.usage.cache_write_input_tokens},
                {"output_tokens", r.usage.output_tokens},
                {"raw", r.usage.raw}};
  if (r.usage.estimated) usage["estimated"] = true;
  json reasoning = r.message.reasoning;
  json j = {{"type", "response"},
            {"turn", turn},
            {"text", r.message.text},
            {"tool_calls", r.message.tool_calls},
            {"reasoning", std::move(reasoning)},
            {"stop_reason", r.stop_reason},
            {"usage", std::move(usage)},
            {"cost_usd", cost_usd},
            {"attempts", r.attempts},
            {"latency_seconds", r.seconds}};
  if (!r.format_error.empty()) {
    j["format_error"] = r.format_error;
    j["reply"] = r.raw;  // the unreadable reply's first 4 KiB, for whoever debugs the endpoint
  }
  return j;
}

json tool_call(int turn, int index, const llm::ToolCall& call) {
  json j = {{"type", "tool_call"}, {"turn", turn}, {"index", index}, {"id", call.id}, {"name", call.name},
            {"arguments", call.arguments}};
  if (call.arguments.size() > kStoredArgumentsBytes) {  // the turn's response record holds them
    j["arguments"] = nullptr;
    j["arguments_bytes"] = call.arguments.size();
  }
  return j;
}

json tool_result(int turn, int index, const llm::ToolCall& call, const ToolOutcome& outcome, const std::string& content) {
  json j = {{"type", "tool_result"}, {"turn", turn},   {"index", index}, {"id", call.id}, {"name", call.name},
            {"content", content},    {"is_error", outcome.is_error}, {"tool_seconds", outcome.seconds}};
  if (outcome.format_error) j["format_error"] = true;
  if (outcome.submitted) j["submitted"] = true;
  if (outcome.candidate) j["candidate"] = *outcome.candidate;
  return j;
}

json user(int turn, const std::string& text) { return {{"type", "user"}, {"turn", turn}, {"text", text}}; }

json budget(int turn, const Used& used, int format_errors, const std::optional<Overhead>& overhead) {
  json j = {{"type", "budget"}, {"turn", turn}, {"used", used}, {"format_errors_in_a_row", format_errors}};
  if (overhead) {
    j["overhead_ms"] = overhead->overhead_ms;
    j["model_seconds"] = overhead->model_seconds;
    j["tool_seconds"] = overhead->tool_seconds;
  }
  return j;
}

json end(RunStatus status, const std::string& reason, const json& error) {
  json j = {{"type", "end"}, {"status", std::string(name_of(status))}, {"reason", reason}};
  if (!error.is_null()) j["error"] = error;
  return j;
}

json final(RunStatus status, const std::string& reason, const std::string& solution, bool passed,
           const std::vector<Trace>& traces, const Used& used, const json& overhead_summary) {
  return {{"type", "final"},
          {"status", std::string(name_of(status))},
          {"reason", reason},
          {"solution", solution.empty() ? json() : json(solution)},
          {"passed", passed},
          {"traces", traces},
          {"used", used},
          {"overhead", overhead_summary}};
}

json resume(int from_turn, const std::string& torn, const std::vector<int>& rerun_calls) {
  json j = {{"type", "resume"}, {"from_turn", from_turn}, {"rerun_calls", rerun_calls}};
  if (!torn.empty()) j["torn_line"] = torn;
  return j;
}

llm::Message assistant_message(const json& r) {
  llm::Message message;
  message.role = llm::Role::assistant;
  message.text = r.at("text").get<std::string>();
  message.tool_calls = r.at("tool_calls").get<std::vector<llm::ToolCall>>();
  // Transcripts from before reasoning was kept have none.
  if (r.contains("reasoning")) message.reasoning = r.at("reasoning").get<std::vector<llm::Reasoning>>();
  return message;
}

llm::Usage usage(const json& r) {
  const auto& u = r.at("usage");
  llm::Usage usage;
  usage.input_tokens = u.at("input_tokens").get<int64_t>();
  usage.cached_input_tokens = u.at("cached_input_tokens").get<int64_t>();
  usage.cache_write_input_tokens = u.value("cache_write_input_tokens", int64_t{0});
  usage.output_tokens = u.at("output_tokens").get<int64_t>();
  usage.estimated = u.value("estimated", false);
  usage.raw = u.at("raw");
  return usage;
}

std::string format_error(const json& r) { return r.value("format_error", ""); }

}  // namespace d2k::agent::record

namespace d2k::agent::record {
namespace {

// What resume reads of each record type (run.cpp's replay): checked when the transcript is read, so that
// a record that is valid JSON but incomplete is an error naming its line and field, not a bare
// nlohmann exception from deep in the replay.
enum class Kind { integer, number, string, boolean, array, object, string_or_null, any };

struct Field {
  const char* path;  // dotted: usage.output_tokens
  Kind kind;
};

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::integer: return "an integer";
    case Kind::number: return "a number";
    case Kind::string: return "a string";
    case Kind::boolean: return "true or false";
    case Kind::array: return "an array";
    case Kind::object: return "an object";
    case Kind::string_or_null: return "a string or null";
    case Kind::any: return "present";
  }
  return "?";
}

bool is(const json& value, Kind kind) {
  switch (kind) {
    case Kind::integer: return value.is_number_integer();
    case Kind::number: return value.is_number();
    case Kind::string: return value.is_string();
    case Kind::boolean: return value.is_boolean();
    case Kind::array: return value.is_array();
    case Kind::object: return value.is_object();
    case Kind::string_or_null: return value.is_string() || value.is_null();
    case Kind::any: return true;
  }
  return false;
}

const std::map<std::string, std::vector<Field>>& required_fields() {
  using K = Kind;
  static const std::map<std::string, std::vector<Field>> fields = {
      {"prompt", {{"system", K::string}, {"user", K::string}, {"tools", K::array}}},
      {"request", {{"turn", K::integer}, {"messages", K::integer}}},
      {"response", {{"turn", K::integer}, {"text", K::string}, {"tool_calls", K::array}, {"usage", K::object},
                    {"usage.input_tokens", K::integer}, {"usage.cached_input_tokens", K::integer},
                    {"usage.output_tokens", K::integer}, {"usage.raw", K::any}, {"cost_usd", K::number}}},
      // arguments: null when over 64 KiB (the turn's response record holds them; arguments_bytes says how many)
      {"tool_call", {{"turn", K::integer}, {"index", K::integer}, {"id", K::string}, {"name", K::string},
                     {"arguments", K::string_or_null}}},
      {"tool_result", {{"turn", K::integer}, {"index", K::integer}, {"id", K::string}, {"name", K::string},
                       {"content", K::string}, {"is_error", K::boolean}}},
      {"user", {{"turn", K::integer}, {"text", K::string}}},
      {"budget", {{"turn", K::integer}, {"used", K::object}, {"used.wall_seconds", K::number},
                  {"format_errors_in_a_row", K::integer}}},
      {"end", {{"status", K::string}, {"reason", K::string}}},
      {"final", {{"status", K::string}, {"reason", K::string}, {"solution", K::string_or_null}, {"passed", K::boolean},
                 {"traces", K::array}}},
      {"resume", {{"from_turn", K::integer}, {"rerun_calls", K::array}}},
  };
  return fields;
}

// Each element of the array `key` (when present) must have `fields`.
const std::map<std::string, std::vector<Field>>& element_fields() {
  using K = Kind;
  static const std::map<std::string, std::vector<Field>> fields = {
      {"tools", {{"name", K::string}, {"description", K::string}, {"parameters", K::any}}},
      {"tool_calls", {{"id", K::string}, {"name", K::string}, {"arguments", K::string}}},
      {"reasoning", {{"type", K::string}}},
  };
  return fields;
}

// "without usage.output_tokens" or "usage.output_tokens is \"x\", not an integer"; nothing when fine.
std::optional<std::string> field_problem(const json& object, const Field& field, const std::string& prefix) {
  const json* at = &object;
  std::string path = field.path;
  for (std::size_t start = 0; start <= path.size();) {
    const auto dot = std::min(path.find('.', start), path.size());
    const auto key = path.substr(start, dot - start);
    if (!at->is_object() || !at->contains(key)) return "without " + prefix + path;
    at = &(*at)[key];
    start = dot + 1;
  }
  if (!is(*at, field.kind)) return fmt::format("{}{} is {}, not {}", prefix, path, cap_text(at->dump(-1, ' ', false, json::error_handler_t::replace), 80),
                                               kind_name(field.kind));
  return std::nullopt;
}

std::optional<std::string> shape_problem(const json& r, const std::string& type) {
  for (const Field& field : {Field{"seq", Kind::integer}, Field{"time", Kind::string}}) {
    if (auto why = field_problem(r, field, "")) return *why;
  }
  if (auto fields = required_fields().find(type); fields != required_fields().end()) {
    for (const Field& field : fields->second) {
      if (auto why = field_problem(r, field, "")) return *why;
    }
  }
  for (const auto& [key, fields] : element_fields()) {
    if (!r.contains(key) || !r[key].is_array()) continue;
    for (std::size_t i = 0; i < r[key].size(); ++i) {
      for (const Field& field : fields) {
        if (auto why = field_problem(r[key][i], field, fmt::format("{}[{}].", key, i))) return *why;
      }
    }
  }
  return std::nullopt;
}

// Checks of values, once the shape is right.
std::optional<std::string> value_problem(const json& r, const std::string& type) {
  if ((type == "end" || type == "final") && !parse_run_status(r["status"].get<std::string>())) {
    return fmt::format("status is {}, not a run status", r["status"].dump());
  }
  if (type == "tool_call" && r["arguments"].is_null()) {
    if (!r.contains("arguments_bytes") || !r["arguments_bytes"].is_number_integer())
      return "arguments is null with no arguments_bytes (an integer) to say how large they were";
  }
  if (type == "tool_result" && r.contains("candidate")) {
    if (auto why = field_problem(r, {"candidate.dir", Kind::string}, "")) return *why;
    if (auto why = field_problem(r, {"candidate.call_index", Kind::integer}, "")) return *why;
  }
  if (type == "final") {
    try {
      (void)r["traces"].get<std::vector<Trace>>();
    } catch (const std::exception& e) {
      return fmt::format("traces: {}", e.what());
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> problem(const json& r) {
  if (!r.contains("type") || !r["type"].is_string()) return std::string("a record without type");
  const auto type = r["type"].get<std::string>();
  auto why = shape_problem(r, type);
  if (!why) why = value_problem(r, type);
  if (!why) return std::nullopt;
  return fmt::format("a {} record {}", type, why->starts_with("without") ? *why : "whose " + *why);
}

}  // namespace d2k::agent::record
