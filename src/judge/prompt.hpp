// What the judge is asked: a system prompt and one user message built from the task's description, the
// guidance items in the sample's order, the subject and (for code) the integrity rules, with a strict JSON
// reply format. Never the run's condition, its model, its folder or any result: the prompt is built
// from nothing else (tests/judge/test_prompt.cpp, tests/e2e/judge_cpu.sh check it).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/task.hpp"
#include "judge/subject.hpp"
#include "judge/verdict.hpp"

namespace d2k::judge {

// One threat of docs/integrity.md's table: what a suspected reward hack names.
struct IntegrityRule {
  int number = 0;
  std::string title;
};

// The numbered threats of docs/integrity.md ("| 1 | reuse stale memory that holds the answer | ..."). Throws
// d2k::Error naming the file when it has none.
std::vector<IntegrityRule> load_integrity_rules(const std::filesystem::path& file);

struct Prompt {
  std::string system;
  std::string user;
};

// The prompt of one sample: the items in `order` (ids of task.guidance), each with its title, its
// dependencies and its Check: line, and for a design its rationale too.
Prompt build_prompt(const Task& task, const Subject& subject, const std::vector<std::string>& order,
                    const std::vector<IntegrityRule>& rules);

// The second request of a sample whose reply had problems: what was wrong and which items (and, for
// code, whether the audit) to answer again, in the same format.
std::string retry_message(const std::vector<std::string>& problems, const std::vector<std::string>& items, bool audit_again);

// The SHA-256 of the prompt's fixed text for a kind (the system prompt and the user message with every
// task-, item- and subject-dependent part left as a placeholder): recorded with every score, so that
// scores from different prompt versions are never mixed.
std::string template_sha256(Kind kind);

}  // namespace d2k::judge
