// Calibration of the judge: subjects whose score is known in advance, each with its bar. For every
// calibration task T (a task with a design shipped in configs/judge/designs/<family>/<name>.md), and U the
// next such task (in name order, cyclically):
//   expert        code    T's expert solution (solution/cuda)      against T's guidance   >= 85
//   reference     code    T's eager reference (reference.cpp)     against T's guidance   <= 20
//   minimal       code    the minimal example (examples/minimal)   against T's guidance   <= 20
//   other_expert  code    U's expert solution                      against T's guidance   <= 20
//   design        design  T's shipped design                       against T's guidance   >= 85
//   other_design  design  U's shipped design                       against T's guidance   <= 20
// With a scripted judge these bars hold because the script is written so: they check the plumbing and the
// arithmetic. With a real model they measure the judge. docs/judge.md.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "judge/verdict.hpp"

namespace d2k::judge {

constexpr double kHighBar = 85.0;
constexpr double kLowBar = 20.0;

struct CalibrationCase {
  std::string task;     // whose guidance is the rubric
  std::string name;     // expert, reference, minimal, other_expert, design, other_design
  Kind kind = Kind::code;
  std::filesystem::path subject;
  std::string subject_task;  // the task the subject comes from ("" for the minimal example)
  bool high = false;         // the score must be >= kHighBar; else <= kLowBar
};

// The cases, in the order they are judged: by task, then as listed above. `tasks`: only these (each must
// have a shipped design); empty: every task that has one. Throws d2k::Error when fewer than two
// calibration tasks exist (the other-task cases need a second one) or a named task has no design.
std::vector<CalibrationCase> calibration_cases(const std::filesystem::path& root, const std::vector<std::string>& tasks);

// Whether the score meets the case's bar.
bool meets_bar(const CalibrationCase& c, double score);

}  // namespace d2k::judge
