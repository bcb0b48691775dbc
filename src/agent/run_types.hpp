// The plain data of a run: its settings (run.json) and how it ended.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/budget.hpp"
#include "agent/condition.hpp"
#include "core/device.hpp"
#include "runner/builder.hpp"

namespace d2k::agent {

// How a run ended. submitted: the model called submit; budget: a budget ran out (the best correct
// solution so far is evaluated); context_overflow: the conversation outgrew the model's context;
// api_error: the model's endpoint failed for good; format_errors: too many malformed responses in a
// row; harness_error: d2k itself failed.
enum class RunStatus { submitted, budget, context_overflow, api_error, format_errors, harness_error };

std::string_view name_of(RunStatus status);
std::optional<RunStatus> parse_run_status(std::string_view name);

// The languages a run may be in, by name: "cuda" or "triton" ("cpp" is cuda's on the cpu device, not a
// language of its own); nothing for any other name.
std::optional<Language> parse_run_language(std::string_view name);
// The language of a run that names none: triton on the cuda device (as in D2K-Bench, where every agent
// writes Triton), cuda (host C++) on the cpu device, which has no Triton backend. `d2k agent` without
// --language and a campaign without campaign.language both take it.
Language default_run_language(Device device);
// Why a run in `language` cannot be on `device`, or nothing: Triton has no cpu backend.
std::optional<std::string> language_refusal(Language language, Device device);
// Whether a solution in `solution` is in the run's `language` (cuda covers the cpu device's host C++).
bool solution_fits(Language language, Language solution);

// An option a resume changed (run.json's `changes`): one that does not change the experiment.
struct SettingChange {
  std::string option;   // as given on the command line: --sandbox, --max-cost-usd, --models
  nlohmann::json from;  // the run's value before, as run.json holds it
  nlohmann::json to;
  std::string time;     // ISO 8601, UTC
};

struct RunSettings {
  std::string task;
  std::string model;         // the name in the models file
  std::string models_file;   // absolute
  Condition condition = Condition::none;
  // What the model writes: cuda (CUDA C++ on the cuda device, host C++ on the cpu device) or triton
  // (Python with @triton.jit kernels, the cuda device only). A run.json without it is cuda (the runs
  // before the option). A campaign's runs are in its campaign.language (campaign/plan.hpp).
  Language language = Language::cuda;
  Budget budget;
  Device device = Device::cpu;
  std::string device_name;
  uint64_t seed = 0;         // every check, benchmark and the final evaluation draw their seeds from it
  std::vector<std::string> workloads;  // the published workloads the run uses; empty: all of them
  double timing_max_seconds = 1.0;
  int timing_min_samples = 0;  // 0: default_min_samples(device)
  int timing_warmup = 3;
  double worker_timeout_seconds = 120.0;
  bool baseline = true;
  int max_format_errors = 5;  // in a row
  std::string root;           // the d2k tree the run was started with
  std::string created;        // ISO 8601, UTC
  std::string sandbox;        // the sandbox mode of builds and workers (strict, best-effort, off); empty: not recorded
  // The models file's entry for the model, its fields that decide the experiment (agent/resume_check.hpp
  // model_entry); null where not recorded.
  nlohmann::json model_entry;
  std::vector<SettingChange> changes;  // what resumes changed, in order
};

}  // namespace d2k::agent
