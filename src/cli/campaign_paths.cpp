#include "cli/campaign_paths.hpp"

#include "core/error.hpp"
#include "core/task_loader.hpp"
#include "eval/workloads.hpp"

namespace d2k {

namespace fs = std::filesystem;

campaign::CampaignPaths campaign_paths(const std::string& given, const Context& context) {
  const fs::path path(given);
  if (fs::is_regular_file(path) && path.filename() == "campaign.db") return {fs::absolute(path).parent_path()};
  if (fs::is_regular_file(path / "campaign.db")) return {fs::absolute(path)};
  const auto named = context.cache_dir / "campaigns" / given;
  if (given.find('/') == std::string::npos && fs::is_regular_file(named / "campaign.db")) return {named};
  fail("{}: no campaign there (no campaign.db in it, nor in {})", given, named.string());
}

fs::path campaign_dir_of(const campaign::Plan& plan, const std::string& dir_option, const Context& context) {
  return dir_option.empty() ? context.cache_dir / "campaigns" / plan.name : fs::absolute(dir_option);
}

std::map<std::string, llm::ModelConfig> load_plan_models(const campaign::Plan& plan) {
  try {
    return llm::load_models(plan.models_file);
  } catch (const std::exception& e) {
    fail("{}: campaign.models_file: {}", plan.file.string(), e.what());
  }
}

void check_plan(const campaign::Plan& plan, const std::map<std::string, llm::ModelConfig>& models,
                const Context& context, std::map<std::string, Task>& tasks) {
  const auto file = plan.file.string();
  for (const auto& name : plan.models)
    if (!models.count(name)) {
      std::string known;
      for (const auto& [key, config] : models) known += (known.empty() ? "" : ", ") + key;
      fail("{}: campaign.models: '{}' is not a model of {} (it has: {})", file, name, plan.models_file.string(), known);
    }
  for (const auto& name : plan.tasks) {
    try {
      tasks.emplace(name, load_task(context.tasks_dir, name));
    } catch (const std::exception& e) {
      fail("{}: campaign.tasks: '{}': {}", file, name, e.what());
    }
    if (auto it = plan.workloads.find(name); it != plan.workloads.end()) {
      try {
        select_workloads(tasks.at(name), it->second, false);
      } catch (const std::exception& e) {
        fail("{}: workloads.\"{}\": {}", file, name, e.what());
      }
    }
  }
}

}  // namespace d2k
