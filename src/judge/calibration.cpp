#include "judge/calibration.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace d2k::judge {

namespace fs = std::filesystem;

std::vector<CalibrationCase> calibration_cases(const fs::path& root, const std::vector<std::string>& only) {
  const auto designs = root / "configs" / "judge" / "designs";
  std::vector<std::string> all;
  if (fs::is_directory(designs))
    for (const auto& family : fs::directory_iterator(designs))
      if (family.is_directory())
        for (const auto& file : fs::directory_iterator(family.path()))
          if (file.path().extension() == ".md")
            all.push_back(family.path().filename().string() + "/" + file.path().stem().string());
  std::sort(all.begin(), all.end());
  if (all.size() < 2) fail("{}: calibration needs designs of at least two tasks, found {}", designs.string(), all.size());
  for (const auto& task : only)
    if (std::find(all.begin(), all.end(), task) == all.end())
      fail("--task {}: no calibration design for it ({}/{}.md)", task, designs.string(), task);
  const auto design_of = [&](const std::string& task) { return designs / (task + ".md"); };
  const auto expert_of = [&](const std::string& task) { return root / "tasks" / task / "solution" / "cuda"; };
  std::vector<CalibrationCase> cases;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto& task = all[i];
    if (!only.empty() && std::find(only.begin(), only.end(), task) == only.end()) continue;
    const auto& other = all[(i + 1) % all.size()];
    cases.push_back({task, "expert", Kind::code, expert_of(task), task, true});
    cases.push_back({task, "reference", Kind::code, root / "tasks" / task / "reference.cpp", task, false});
    cases.push_back({task, "minimal", Kind::code, root / "examples" / "minimal", "", false});
    cases.push_back({task, "other_expert", Kind::code, expert_of(other), other, false});
    cases.push_back({task, "design", Kind::design, design_of(task), task, true});
    cases.push_back({task, "other_design", Kind::design, design_of(other), other, false});
  }
  return cases;
}

bool meets_bar(const CalibrationCase& c, double score) { return c.high ? score >= kHighBar : score <= kLowBar; }

}  // namespace d2k::judge
