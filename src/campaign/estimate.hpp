// `d2k campaign run --dry-run`: what the plan may cost before a request is sent. Bounds from the
// budget and models.toml's prices, not predictions.
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "campaign/plan.hpp"
#include "llm/model_config.hpp"

namespace d2k::campaign {

struct ModelEstimate {
  std::string model;
  int runs = 0;
  int64_t turns = 0;                        // at most: runs x budget.turns
  int64_t output_tokens = 0;                // at most: turns x the model's max_tokens
  double output_usd = 0;                    // those at the output price
  std::optional<int64_t> tokens;            // input + output at most: runs x budget.max_tokens_total
  std::optional<double> usd;                // at most: runs x budget.max_cost_usd, else tokens at the dearer price
};

struct Estimate {
  int runs = 0;
  int64_t turns = 0;
  std::vector<ModelEstimate> models;
  std::optional<int64_t> tokens;
  std::optional<double> usd;
};

Estimate estimate(const Plan& plan, const std::map<std::string, llm::ModelConfig>& models);
void print_estimate(std::ostream& out, const Plan& plan, const Estimate& estimate);

}  // namespace d2k::campaign
