// What `d2k agent --resume` may change. The options given with --resume are compared with the run's
// settings (run.json): one that would change the experiment (the task, model, condition, turns, seed,
// device, workloads, timing, baseline; a models file whose entry or prices differ) is refused, naming
// the option, the run's value and the given one; one that does not (the sandbox, the token, cost and
// wall-clock budgets, the models file's path or its endpoint settings) is applied and recorded in
// run.json's `changes` with its time.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/run_types.hpp"
#include "llm/model_config.hpp"

namespace d2k::agent {

// One option given on the command line, as the value it sets in run.json.
struct GivenOption {
  std::string option;     // --turns
  std::string field;      // the JSON pointer into run.json: /budget/max_turns
  nlohmann::json value;   // 5
};

// Applies the given options to `settings`. Throws d2k::Error for one that changes the experiment;
// appends a SettingChange (at `time`) for each allowed one whose value differs.
void apply_resume_options(RunSettings& settings, const std::vector<GivenOption>& given, const std::string& time);

// The fields of a models file's entry that decide the experiment: provider, model id, max_tokens and
// its field, temperature, top_p, prompt_cache, extra_body and the prices. The endpoint (base_url), the
// key's variable, the rate limit, timeouts and retries may change between a run's start and its resume.
nlohmann::json model_entry(const llm::ModelConfig& model);

// Refuses `model` (from `models_file`) when its entry differs from the one the run recorded in a field
// of model_entry (the error names the file, the field and both values); records a change of the models
// file's path in settings.changes. A run that recorded no entry is not checked.
void check_model_entry(RunSettings& settings, const llm::ModelConfig& model, const std::string& models_file,
                       const std::string& time);

}  // namespace d2k::agent
