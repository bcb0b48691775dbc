// One agent run: a model, a task, a condition, a budget, driven turn by turn through the tools, with
// everything written to the run folder as it happens (run.json, transcript.jsonl, workspace/,
// candidates/, submitted/, result.json). A run killed at any point continues with resume_run.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "agent/run_types.hpp"
#include "eval/evaluator.hpp"
#include "llm/chat.hpp"

namespace d2k::agent {

struct RunSetup {
  RunSettings settings;
  const Task* task = nullptr;
  EvalEnvironment environment;           // device, ceilings, caches, root, worker, sandbox
  EvalSettings eval;                     // timing and timeouts; workloads and seed come from settings
  llm::ChatClient* client = nullptr;    // may be null for a run that has ended (run_has_ended)
  std::function<double(const llm::Usage&)> cost_usd;  // the model's prices (llm::cost_usd); none: free
  std::filesystem::path run_dir;
  std::ostream* log = nullptr;           // a line per turn, for people
};

struct RunResult {
  RunStatus status = RunStatus::harness_error;
  std::string reason;
  std::string solution;  // the evaluated solution's folder in the run folder; empty when none
  bool passed = false;   // the final evaluation passed every workload (or a design was submitted)
  std::vector<Trace> traces;
  int turns = 0;
  Used used;             // tokens, cost and wall time of the whole run
  double overhead_mean_ms = 0;
  double overhead_max_ms = 0;
};

// Creates the run folder (run.json, the workspace with TASK.md, the prompt record) and drives the run
// to its end.
RunResult start_run(const RunSetup& setup);

// Continues the run in setup.run_dir from its transcript: a torn last line is cut off (and recorded),
// tool calls without a result are run again (a write or edit first undone), and nothing already
// recorded is repeated. A run that had ended is reported again, not rerun.
RunResult resume_run(const RunSetup& setup);

// Whether the run in run_dir has ended (its transcript holds an end record): resuming it asks the
// model nothing, so it needs no client, no models file and no API key.
bool run_has_ended(const std::filesystem::path& run_dir);

// run.json of a run folder.
RunSettings read_settings(const std::filesystem::path& run_dir);

}  // namespace d2k::agent
