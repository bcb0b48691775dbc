// A run's budget and what it has used. The turn budget always applies; the others only when set.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "llm/chat.hpp"

namespace d2k::agent {

struct Budget {
  int max_turns = 350;
  std::optional<int64_t> max_tokens_total;  // input + output tokens over all responses
  std::optional<double> max_cost_usd;
  std::optional<double> max_wall_seconds;   // the run's own time; time between a kill and --resume is not counted
};

struct Used {
  int turns = 0;  // model responses received
  int64_t input_tokens = 0;
  int64_t cached_input_tokens = 0;
  int64_t cache_write_input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0;
  double wall_seconds = 0;
  int estimated_responses = 0;  // responses whose usage the endpoint left out (or garbled), so estimated
};

// Adds one response's usage and cost, and counts the turn.
void charge(Used& used, const llm::Usage& usage, double cost_usd);

// Why no further model call may be made ("turns: 350 of 350 used"), or nothing while budget is left.
std::optional<std::string> exhausted(const Budget& budget, const Used& used);

// Why the budget cannot be run ("--max-cost-usd: must be at least 0, not -1"), named by the command-line
// option that sets each part; nothing when it is valid. A negative (or NaN) budget would otherwise be
// accepted and end the run before its first call, or never.
std::optional<std::string> invalid(const Budget& budget);

// One line for the prompt: what the run may spend.
std::string describe(const Budget& budget);

}  // namespace d2k::agent
