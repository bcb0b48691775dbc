#include "agent/budget.hpp"

#include <fmt/format.h>

namespace d2k::agent {

void charge(Used& used, const llm::Usage& usage, double cost_usd) {
  ++used.turns;
  used.input_tokens += usage.input_tokens;
  used.cached_input_tokens += usage.cached_input_tokens;
  used.cache_write_input_tokens += usage.cache_write_input_tokens;
  used.output_tokens += usage.output_tokens;
  used.cost_usd += cost_usd;
  if (usage.estimated) ++used.estimated_responses;
}

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

std::optional<std::string> invalid(const Budget& budget) {
  if (budget.max_turns < 1) return fmt::format("--turns: must be at least 1, not {}", budget.max_turns);
  if (budget.max_tokens_total && *budget.max_tokens_total < 0)
    return fmt::format("--max-tokens-total: must be at least 0, not {}", *budget.max_tokens_total);
  // `!(x >= 0)` and not `x < 0`: NaN is refused too.
  if (budget.max_cost_usd && !(*budget.max_cost_usd >= 0))
    return fmt::format("--max-cost-usd: must be at least 0, not {}", *budget.max_cost_usd);
  if (budget.max_wall_seconds && !(*budget.max_wall_seconds >= 0))
    return fmt::format("--max-wall-seconds: must be at least 0, not {}", *budget.max_wall_seconds);
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
