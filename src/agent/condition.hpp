// The guidance condition of a run: the one thing that differs between paired runs of a task.
#pragma once

#include <optional>
#include <set>
#include <string_view>

namespace d2k::agent {

enum class Condition { none, L1, L1_L2, L1_L2_L3, design_only };

std::string_view name_of(Condition condition);  // "none", "L1", "L1+L2", "L1+L2+L3", "design-only"
std::optional<Condition> parse_condition(std::string_view text);
// The guidance levels the prompt shows: {} for none and design-only.
std::set<int> levels_of(Condition condition);

}  // namespace d2k::agent
