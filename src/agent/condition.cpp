#include "agent/condition.hpp"

namespace d2k::agent {

std::string_view name_of(Condition condition) {
  switch (condition) {
    case Condition::none: return "none";
    case Condition::L1: return "L1";
    case Condition::L1_L2: return "L1+L2";
    case Condition::L1_L2_L3: return "L1+L2+L3";
    case Condition::design_only: return "design-only";
  }
  return "?";
}

std::optional<Condition> parse_condition(std::string_view text) {
  for (auto c : {Condition::none, Condition::L1, Condition::L1_L2, Condition::L1_L2_L3, Condition::design_only})
    if (name_of(c) == text) return c;
  return std::nullopt;
}

std::set<int> levels_of(Condition condition) {
  switch (condition) {
    case Condition::L1: return {1};
    case Condition::L1_L2: return {1, 2};
    case Condition::L1_L2_L3: return {1, 2, 3};
    default: return {};
  }
}

}  // namespace d2k::agent
