// plan.toml: every key checked, unknown ones refused, each error naming file:line, the field and the
// value as written (core/toml_source.hpp), as models.toml and task.toml are read.
#include "campaign/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "agent/run_types.hpp"
#include "agent/workspace.hpp"
#include "core/splitmix.hpp"
#include "core/toml_source.hpp"

namespace d2k::campaign {
namespace {

namespace fs = std::filesystem;

class Reader : public TomlSource {
 public:
  using TomlSource::TomlSource;

  static std::string join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }
  const toml::table* table(const toml::table& parent, const std::string& path, std::string_view key) const {
    const toml::node* node = parent.get(key);
    if (!node) return nullptr;
    if (!node->is_table()) bad(*node, join(path, key), "must be a table");
    return node->as_table();
  }
  std::string string(const toml::node& node, const std::string& field) const {
    auto value = node.value_exact<std::string>();
    if (!value || value->empty()) bad(node, field, "must be a non-empty string");
    return *value;
  }
  int64_t integer(const toml::node& node, const std::string& field, int64_t low) const {
    auto value = node.value_exact<int64_t>();
    if (!value) bad(node, field, "must be an integer");
    if (*value < low) bad(node, field, fmt::format("must be at least {}", low));
    return *value;
  }
  double number(const toml::node& node, const std::string& field, double low, bool open = false) const {
    if (!node.is_number()) bad(node, field, "must be a number");
    const double value = *node.value<double>();
    if (!std::isfinite(value) || value < low || (open && value == low))
      bad(node, field, fmt::format("must be {} {}", open ? "above" : "at least", low));
    return value;
  }
  bool boolean(const toml::node& node, const std::string& field) const {
    auto value = node.value_exact<bool>();
    if (!value) bad(node, field, "must be true or false");
    return *value;
  }
  // A non-empty array of distinct non-empty strings.
  std::vector<std::string> strings(const toml::node& node, const std::string& field) const {
    const toml::array* array = node.as_array();
    if (!array || array->empty()) bad(node, field, "must be a non-empty array of strings");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < array->size(); ++i) {
      auto item = string((*array)[i], fmt::format("{}[{}]", field, i));
      if (std::find(out.begin(), out.end(), item) != out.end()) bad((*array)[i], fmt::format("{}[{}]", field, i), "is listed twice");
      out.push_back(item);
    }
    return out;
  }
  const toml::node& need(const toml::table& table, const std::string& path, std::string_view key) const {
    const toml::node* node = table.get(key);
    if (!node) error(&table, path, fmt::format("missing required key '{}'", key));
    return *node;
  }
};

fs::path relative_to(const fs::path& plan_file, const std::string& path) {
  const fs::path p(path);
  return p.is_absolute() ? p : fs::absolute(plan_file.parent_path() / p).lexically_normal();
}

}  // namespace

Language campaign_language(const Plan& plan, Device device) {
  const Language language = plan.language.value_or(agent::default_run_language(device));
  if (agent::language_refusal(language, device))
    fail("{}: campaign.language = \"{}\" with campaign.device = \"{}\", the {} device on this machine: the {} device "
         "has no Triton backend (Triton solutions run on the cuda device; use language = \"cuda\", host C++, there)",
         plan.file.string(), name_of(language), plan.device, name_of(device), name_of(device));
  return language;
}

uint64_t paired_seed(uint64_t campaign_seed, const std::string& task, int repeat) {
  // FNV-1a of the task's name, then splitmix: a seed per (task, repeat), the same for every model and condition.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : task) h = (h ^ c) * 1099511628211ull;
  return splitmix_finalize(campaign_seed + kSplitMixIncrement * (h + static_cast<uint64_t>(repeat) + 1));
}

std::string folder_of(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '/') out += "__";
    else if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == '+') out += c;
    else out += '_';
  }
  return out;
}

std::vector<PlannedRun> Plan::runs() const {
  std::vector<PlannedRun> out;
  for (const auto& model : models)
    for (const auto& task : tasks)
      for (const auto condition : conditions)
        for (int r = 0; r < repeats; ++r)
          out.push_back({fmt::format("{}/{}/{}/{}", model, task, agent::name_of(condition), r), model, task, condition, r,
                         paired_seed(seed, task, r)});
  return out;
}

Plan load_plan(const fs::path& file) {
  const auto text = agent::read_whole_file(file);
  if (!text) fail("{}: cannot read the plan", file.string());
  return parse_plan(*text, file);
}

Plan parse_plan(const std::string& text, const fs::path& file) {
  const Reader reader(file);
  toml::table root;
  try {
    root = toml::parse(text, file.string());
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    fail("{}:{}:{}: not TOML: {}", file.string(), at.line, at.column, e.description());
  }
  Plan plan;
  plan.file = fs::absolute(file);
  plan.text = text;
  reader.closed(root, "", {"campaign", "workloads", "budget", "timing", "concurrency", "slurm"});

  const toml::table* c = reader.table(root, "", "campaign");
  if (!c) reader.error(&root, "campaign", "missing required table [campaign]");
  reader.closed(*c, "campaign", {"name", "seed", "models_file", "models", "tasks", "conditions", "repeats", "device",
                                 "language", "sandbox", "rerun"});
  plan.name = reader.string(reader.need(*c, "campaign", "name"), "campaign.name");
  if (plan.name.find_first_of("/\\") != std::string::npos || plan.name == "." || plan.name == "..")
    reader.bad(*c->get("name"), "campaign.name", "must be a plain name (no '/'): it names the campaign's folder");
  if (auto* n = c->get("seed")) plan.seed = static_cast<uint64_t>(reader.integer(*n, "campaign.seed", 0));
  plan.models_file = relative_to(plan.file, reader.string(reader.need(*c, "campaign", "models_file"), "campaign.models_file"));
  plan.models = reader.strings(reader.need(*c, "campaign", "models"), "campaign.models");
  plan.tasks = reader.strings(reader.need(*c, "campaign", "tasks"), "campaign.tasks");
  const auto& conditions = reader.need(*c, "campaign", "conditions");
  const auto names = reader.strings(conditions, "campaign.conditions");
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto parsed = agent::parse_condition(names[i]);
    if (!parsed)
      reader.bad(*conditions.as_array()->get(i), fmt::format("campaign.conditions[{}]", i),
                 "unknown condition (known: none, L1, L1+L2, L1+L2+L3, design-only)");
    plan.conditions.push_back(*parsed);
  }
  if (auto* n = c->get("repeats")) plan.repeats = static_cast<int>(reader.integer(*n, "campaign.repeats", 1));
  if (auto* n = c->get("device")) {
    plan.device = reader.string(*n, "campaign.device");
    if (plan.device != "auto" && plan.device != "cuda" && plan.device != "cpu")
      reader.bad(*n, "campaign.device", "must be auto, cuda or cpu");
  }
  if (auto* n = c->get("language")) {
    const auto language = agent::parse_run_language(reader.string(*n, "campaign.language"));
    if (!language) reader.bad(*n, "campaign.language", "must be cuda or triton");
    if (plan.device == "cpu" && agent::language_refusal(*language, Device::cpu))
      reader.bad(*n, "campaign.language",
                 "the cpu device (campaign.device = \"cpu\") has no Triton backend: Triton solutions run on the cuda "
                 "device; on the cpu device use language = \"cuda\" (host C++)");
    plan.language = *language;
  }
  if (auto* n = c->get("sandbox")) {
    plan.sandbox = reader.string(*n, "campaign.sandbox");
    if (plan.sandbox != "strict" && plan.sandbox != "best-effort" && plan.sandbox != "off")
      reader.bad(*n, "campaign.sandbox", "must be strict, best-effort or off");
  }
  if (auto* n = c->get("rerun")) plan.rerun = reader.boolean(*n, "campaign.rerun");

  if (const toml::table* w = reader.table(root, "", "workloads")) {
    for (auto&& [key, node] : *w) {
      const std::string task(key.str());
      const auto field = "workloads.\"" + task + "\"";
      if (std::find(plan.tasks.begin(), plan.tasks.end(), task) == plan.tasks.end())
        reader.error(&node, field, "names a task that campaign.tasks does not list");
      plan.workloads[task] = reader.strings(node, field);
    }
  }
  if (const toml::table* b = reader.table(root, "", "budget")) {
    reader.closed(*b, "budget", {"turns", "max_tokens_total", "max_cost_usd", "max_wall_seconds"});
    if (auto* n = b->get("turns")) plan.budget.max_turns = static_cast<int>(reader.integer(*n, "budget.turns", 1));
    if (auto* n = b->get("max_tokens_total")) plan.budget.max_tokens_total = reader.integer(*n, "budget.max_tokens_total", 0);
    if (auto* n = b->get("max_cost_usd")) plan.budget.max_cost_usd = reader.number(*n, "budget.max_cost_usd", 0);
    if (auto* n = b->get("max_wall_seconds")) plan.budget.max_wall_seconds = reader.number(*n, "budget.max_wall_seconds", 0);
  }
  if (const toml::table* t = reader.table(root, "", "timing")) {
    reader.closed(*t, "timing", {"max_seconds", "min_samples", "warmup", "timeout", "baseline"});
    if (auto* n = t->get("max_seconds")) plan.timing.max_seconds = reader.number(*n, "timing.max_seconds", 0, true);
    if (auto* n = t->get("min_samples")) plan.timing.min_samples = static_cast<int>(reader.integer(*n, "timing.min_samples", 0));
    if (auto* n = t->get("warmup")) plan.timing.warmup = static_cast<int>(reader.integer(*n, "timing.warmup", 0));
    if (auto* n = t->get("timeout")) plan.timing.worker_timeout_seconds = reader.number(*n, "timing.timeout", 0, true);
    if (auto* n = t->get("baseline")) plan.timing.baseline = reader.boolean(*n, "timing.baseline");
  }
  if (const toml::table* k = reader.table(root, "", "concurrency")) {
    reader.closed(*k, "concurrency", {"runs", "per_endpoint"});
    if (auto* n = k->get("runs")) plan.concurrent_runs = static_cast<int>(reader.integer(*n, "concurrency.runs", 1));
    if (auto* n = k->get("per_endpoint")) plan.per_endpoint = static_cast<int>(reader.integer(*n, "concurrency.per_endpoint", 1));
  }
  if (const toml::table* s = reader.table(root, "", "slurm")) {
    reader.closed(*s, "slurm", {"shards", "gpus_per_task", "cpus_per_task", "minutes_per_run", "partition", "account",
                                "sbatch_options"});
    auto& slurm = plan.slurm;
    if (auto* n = s->get("shards")) slurm.shards = static_cast<int>(reader.integer(*n, "slurm.shards", 1));
    if (auto* n = s->get("gpus_per_task")) slurm.gpus_per_task = static_cast<int>(reader.integer(*n, "slurm.gpus_per_task", 0));
    if (auto* n = s->get("cpus_per_task")) slurm.cpus_per_task = static_cast<int>(reader.integer(*n, "slurm.cpus_per_task", 1));
    if (auto* n = s->get("minutes_per_run")) slurm.minutes_per_run = reader.number(*n, "slurm.minutes_per_run", 0, true);
    if (auto* n = s->get("partition")) slurm.partition = reader.string(*n, "slurm.partition");
    if (auto* n = s->get("account")) slurm.account = reader.string(*n, "slurm.account");
    if (auto* n = s->get("sbatch_options")) {
      slurm.sbatch_options = reader.strings(*n, "slurm.sbatch_options");
      for (std::size_t i = 0; i < slurm.sbatch_options.size(); ++i)
        if (slurm.sbatch_options[i].rfind("--", 0) != 0 || slurm.sbatch_options[i].find('\n') != std::string::npos)
          reader.bad(*n->as_array()->get(i), fmt::format("slurm.sbatch_options[{}]", i),
                     "must be one long sbatch option on one line, as --name=value");
    }
  }
  return plan;
}

nlohmann::json plan_json(const Plan& plan) {
  nlohmann::json conditions = nlohmann::json::array();
  for (auto c : plan.conditions) conditions.push_back(std::string(agent::name_of(c)));
  const auto optional = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  return {{"name", plan.name},
          {"file", plan.file.string()},
          {"seed", plan.seed},
          {"models_file", plan.models_file.string()},
          {"models", plan.models},
          {"tasks", plan.tasks},
          {"conditions", conditions},
          {"repeats", plan.repeats},
          {"device", plan.device},
          {"language", plan.language ? nlohmann::json(std::string(name_of(*plan.language))) : nlohmann::json()},
          {"sandbox", plan.sandbox},
          {"rerun", plan.rerun},
          {"workloads", plan.workloads},
          {"budget", {{"max_turns", plan.budget.max_turns}, {"max_tokens_total", optional(plan.budget.max_tokens_total)},
                      {"max_cost_usd", optional(plan.budget.max_cost_usd)},
                      {"max_wall_seconds", optional(plan.budget.max_wall_seconds)}}},
          {"timing", {{"max_seconds", plan.timing.max_seconds}, {"min_samples", plan.timing.min_samples},
                      {"warmup", plan.timing.warmup}, {"timeout", plan.timing.worker_timeout_seconds},
                      {"baseline", plan.timing.baseline}}},
          {"concurrency", {{"runs", plan.concurrent_runs}, {"per_endpoint", plan.per_endpoint}}}};
}

}  // namespace d2k::campaign
