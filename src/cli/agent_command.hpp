// `d2k agent`: one agent run (src/agent) from the command line, or the resumption of one.
#pragma once

#include <optional>
#include <string>

#include "cli/context.hpp"

namespace d2k {

struct AgentOptions {
  std::string task;
  std::string model;
  std::string models_file;
  std::string condition = "none";
  int turns = 350;
  std::optional<int64_t> max_tokens_total;
  std::optional<double> max_cost_usd;
  std::optional<double> max_wall_seconds;
  std::string runs_dir;  // default: <cache>/runs
  std::string resume;    // a run folder to continue
};

// Exit code: 0 when the run ended with a solution (or design) that passed its final evaluation, 1 when
// it ended without one, 2 for bad usage or a harness error.
int run_agent_command(const AgentOptions& agent, CommonOptions options);

}  // namespace d2k
