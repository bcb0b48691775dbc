#include "agent/resume_check.hpp"

#include <algorithm>
#include <array>
#include <string_view>

#include "agent/records.hpp"
#include "core/error.hpp"

namespace d2k::agent {
namespace {

using nlohmann::json;

// The run.json fields a resume may change: none of them decides what the model is asked or how its
// work is measured. The turn budget does (paired runs get the same turns); the token, cost and
// wall-clock budgets are caps on spending, and the sandbox is the machine's.
constexpr std::array<std::string_view, 4> kChangeable = {"/budget/max_tokens_total", "/budget/max_cost_usd",
                                                         "/budget/max_wall_seconds", "/sandbox"};

bool changeable(const std::string& field) {
  return std::find(kChangeable.begin(), kChangeable.end(), field) != kChangeable.end();
}

// "budget.max_turns", as a person reads run.json.
std::string dotted(const std::string& pointer) {
  std::string out = pointer.substr(1);
  std::replace(out.begin(), out.end(), '/', '.');
  return out;
}

}  // namespace

void apply_resume_options(RunSettings& settings, const std::vector<GivenOption>& given, const std::string& time) {
  json document = settings;
  for (const auto& g : given) {
    const json::json_pointer pointer(g.field);
    const json recorded = document.contains(pointer) ? document.at(pointer) : json();
    if (recorded == g.value) continue;
    if (!changeable(g.field))
      fail("{} {}: the run has {} = {} (run.json); a resume keeps the settings that decide the experiment, so it "
           "cannot take {} (leave the option out, or start a new run)",
           g.option, g.value.dump(), dotted(g.field), recorded.dump(), g.option);
    document[pointer] = g.value;
    settings.changes.push_back({g.option, recorded, g.value, time});
  }
  auto changes = std::move(settings.changes);
  settings = document.get<RunSettings>();
  settings.changes = std::move(changes);
}

json model_entry(const llm::ModelConfig& model) {
  const auto optional = [](const std::optional<double>& v) { return v ? json(*v) : json(); };
  return {{"provider", llm::to_string(model.provider)},
          {"model", model.model},
          {"max_tokens", model.max_tokens},
          {"max_tokens_field", model.max_tokens_field},
          {"temperature", optional(model.temperature)},
          {"top_p", optional(model.top_p)},
          {"prompt_cache", model.prompt_cache},
          {"extra_body", model.extra_body},
          {"prices", {{"input", model.prices.input},
                      {"cached_input", model.prices.cached_input},
                      {"output", model.prices.output},
                      {"cache_write", model.prices.cache_write}}}};
}

void check_model_entry(RunSettings& settings, const llm::ModelConfig& model, const std::string& models_file,
                       const std::string& time) {
  if (!settings.model_entry.is_null()) {
    const auto now = model_entry(model);
    for (const auto& patch : json::diff(settings.model_entry, now)) {
      const json::json_pointer at(patch.at("path").get<std::string>());
      const json was = settings.model_entry.contains(at) ? settings.model_entry.at(at) : json();
      const json is = now.contains(at) ? now.at(at) : json();
      fail("--models: {}: models.{}{} is {} where the run has {} (run.json model_entry); a resume keeps the "
           "model and its prices, so that the run's cost is counted at one price",
           models_file, model.name, dotted(at.to_string()).insert(0, "."), is.dump(), was.dump());
    }
  }
  if (models_file != settings.models_file) {
    settings.changes.push_back({"--models", settings.models_file, models_file, time});
    settings.models_file = models_file;
  }
}

}  // namespace d2k::agent
