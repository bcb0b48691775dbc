#include "agent/budget.hpp"

#include <fmt/format.h>

namespace d2k::agent {

std::optional<std::string> exhausted(const Budget& budget, const Used& used) {
  if (used.turns >= budget.max_turns) return fmt::format("turns: {} of {} used", used.turns, budget.max_turns);
  const int64_t tokens = used.input_tokens + used.output_tokens;
  if (budget.max_tokens_total && tokens >= *budget.max_tokens_total)
    return fmt::format("tokens: {} of {} used", tokens, *budget.max_tokens_total);
  if (budget.max_cost_usd && used.cost_usd >= *budget.max_cost_usd)
    return fmt::format("cost: ${:.4f} of ${:.4f} used", used.cost_usd, *budget.max_cost_usd);
  if (budget.max_wall_seconds && used.wall_seconds >= *budget.max_wall_seconds)
    return fmt::format("wall clock: {:.0f} s of {:.0f} s used", used.wall_seconds, *budget.max_wall_seconds);
  return std::nullopt;
}

std::string describe(const Budget& budget) {
  std::string text = fmt::format("{} turns (one turn is one response of yours)", budget.max_turns);
  if (budget.max_tokens_total) text += fmt::format(", {} tokens in and out", *budget.max_tokens_total);
  if (budget.max_cost_usd) text += fmt::format(", ${:.2f}", *budget.max_cost_usd);
  if (budget.max_wall_seconds) text += fmt::format(", {:.0f} s of wall-clock time", *budget.max_wall_seconds);
  return text;
}

}  // namespace d2k::agent
