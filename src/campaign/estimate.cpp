#include "campaign/estimate.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace d2k::campaign {

Estimate estimate(const Plan& plan, const std::map<std::string, llm::ModelConfig>& models) {
  Estimate e;
  const int per_model = static_cast<int>(plan.tasks.size() * plan.conditions.size()) * plan.repeats;
  bool tokens_bounded = plan.budget.max_tokens_total.has_value(), usd_bounded = true;
  int64_t tokens = 0;
  double usd = 0;
  for (const auto& name : plan.models) {
    const auto& config = models.at(name);
    ModelEstimate m;
    m.model = name;
    m.runs = per_model;
    m.turns = static_cast<int64_t>(per_model) * plan.budget.max_turns;
    m.output_tokens = m.turns * config.max_tokens;
    m.output_usd = static_cast<double>(m.output_tokens) * config.prices.output / 1e6;
    if (plan.budget.max_tokens_total) m.tokens = per_model * *plan.budget.max_tokens_total;
    if (plan.budget.max_cost_usd) {
      m.usd = per_model * *plan.budget.max_cost_usd;
    } else if (m.tokens) {
      const double dearest = std::max({config.prices.input, config.prices.cached_input, config.prices.cache_write, config.prices.output});
      m.usd = static_cast<double>(*m.tokens) * dearest / 1e6;
    }
    e.runs += m.runs;
    e.turns += m.turns;
    if (m.tokens) tokens += *m.tokens;
    if (m.usd) usd += *m.usd;
    else usd_bounded = false;
    e.models.push_back(m);
  }
  if (tokens_bounded) e.tokens = tokens;
  if (usd_bounded) e.usd = usd;
  return e;
}

void print_estimate(std::ostream& out, const Plan& plan, const Estimate& e) {
  out << fmt::format("campaign {}: {} models x {} tasks x {} conditions x {} repeats = {} runs, at most {} turns\n", plan.name,
                     plan.models.size(), plan.tasks.size(), plan.conditions.size(), plan.repeats, e.runs, e.turns);
  for (const auto& m : e.models) {
    out << fmt::format("  {}: {} runs, at most {} turns, {} output tokens (${:.2f} at its output price)", m.model, m.runs,
                       m.turns, m.output_tokens, m.output_usd);
    out << (m.tokens ? fmt::format(", {} tokens in all", *m.tokens) : std::string(", input tokens unbounded"));
    out << (m.usd ? fmt::format(", at most ${:.2f}", *m.usd) : std::string(", dollars unbounded")) << "\n";
  }
  out << fmt::format("total: at most {} tokens, at most {}\n", e.tokens ? std::to_string(*e.tokens) : "unbounded",
                     e.usd ? fmt::format("${:.2f}", *e.usd) : "unbounded dollars (set budget.max_tokens_total or budget.max_cost_usd)");
  out << "budgets are checked before each request, so a run may pass its token or cost budget by its last turn\n";
}

}  // namespace d2k::campaign
