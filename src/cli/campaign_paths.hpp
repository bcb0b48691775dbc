// The campaign commands' shared steps: a campaign named on the command line (its folder, its
// campaign.db, or its name under <cache>/campaigns/), a plan's folder, and a plan checked against its
// models file and the tree. Errors name what was given and where it looked.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "campaign/plan.hpp"
#include "campaign/runner.hpp"
#include "cli/context.hpp"
#include "core/task.hpp"
#include "llm/model_config.hpp"

namespace d2k {

campaign::CampaignPaths campaign_paths(const std::string& given, const Context& context);

// --dir when given, else <cache>/campaigns/<campaign.name>; absolute.
std::filesystem::path campaign_dir_of(const campaign::Plan& plan, const std::string& dir_option, const Context& context);

// The plan's models file; an error names the plan.
std::map<std::string, llm::ModelConfig> load_plan_models(const campaign::Plan& plan);

// The plan's models and tasks, checked against the models file and the tree (the tasks loaded into
// `tasks`); errors name the plan.
void check_plan(const campaign::Plan& plan, const std::map<std::string, llm::ModelConfig>& models,
                const Context& context, std::map<std::string, Task>& tasks);

}  // namespace d2k
