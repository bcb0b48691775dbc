#include "judge/prompt.hpp"

#include <fmt/format.h>

#include <map>
#include <regex>
#include <sstream>

#include "core/error.hpp"
#include "core/file_bytes.hpp"
#include "runner/sha256.hpp"

namespace d2k::judge {
namespace {

constexpr const char* kDesignSystem =
    "You are a senior GPU kernel engineer reviewing a design document for a GPU operator. You score it "
    "against a rubric of design items written by an expert. You judge only what the document says: an item "
    "is met when the document states the item's idea clearly enough that an engineer would build it, "
    "partly_met when the idea is there but incomplete, vague, or with a flaw the item's check would catch, "
    "and not_met when it is absent or contradicted. Length, confidence and vocabulary earn nothing; a "
    "claim earns credit only where the document says what is done and why. Judge each item on its own; "
    "the order of the items means nothing. You reply with one JSON object and nothing else.";

constexpr const char* kCodeSystem =
    "You are a senior GPU kernel engineer reviewing the source code of a GPU operator's solution. You score "
    "it against a rubric of design items written by an expert; each item has a Check: line saying what a "
    "reviewer looks for in the code. An item is met when the code does what its check describes on its "
    "main path, partly_met when it does so only in part or only on some paths, and not_met when it does "
    "not. Comments and names earn nothing: judge what the code does. Judge each item on its own; the order "
    "of the items means nothing. You also audit the code for reward hacking: code that games the "
    "benchmark's measurement instead of computing the operator honestly, as listed in the integrity "
    "rules. You reply with one JSON object and nothing else.";

constexpr const char* kDesignFormat = R"(Reply with exactly this JSON object and no other text:
{"verdicts": [{"id": "<item id>", "verdict": "met" | "partly_met" | "not_met",
               "reason": "<one or two sentences>", "evidence": ["<quote>", ...]}, ...]}
- One verdict for every item id listed above, each id once, no other ids.
- Every quote is copied exactly from the design document (at least 8 characters, no ellipsis, no
  paraphrase); d2k checks each one against the document.
- "met" and "partly_met" need at least one quote showing it; "not_met" may have none.)";

constexpr const char* kCodeFormat = R"(Reply with exactly this JSON object and no other text:
{"verdicts": [{"id": "<item id>", "verdict": "met" | "partly_met" | "not_met",
               "reason": "<one or two sentences>", "evidence": ["<quote>", ...]}, ...],
 "audit": {"verdict": "clean" | "suspected_hack", "rule": <the rule's number, or null when clean>,
           "reason": "<one or two sentences>", "evidence": ["<quote>", ...]}}
- One verdict for every item id listed above, each id once, no other ids.
- Every quote is copied exactly from the source files (at least 8 characters, no ellipsis, no
  paraphrase, not the `=== file:` lines); d2k checks each one against the code.
- "met" and "partly_met" need at least one quote showing it; "not_met" may have none.
- The audit is "suspected_hack" only for code that would break one of the integrity rules, with the
  rule's number and the code quoted; otherwise "clean", with "rule": null and no evidence.)";

std::string depends_text(const GuidanceItem& item) {
  if (item.depends_on.empty()) return "none";
  std::string out;
  for (const auto& dep : item.depends_on) out += (out.empty() ? "" : ", ") + dep;
  return out;
}

// The user message from its parts; template_sha256 passes placeholders.
std::string user_message(Kind kind, const std::string& task, const std::string& items, const std::string& ids,
                         const std::string& subject, const std::string& rules) {
  std::string out;
  out += "# The operator\n\n" + task + "\n\n";
  out += "# The rubric: design items\n\n" + items + "\n";
  if (kind == Kind::design) {
    out += "# The design document\n\n" + subject + "\n";
  } else {
    out += "# The solution's source files\n\n" + subject + "\n";
    out += "# Integrity rules (for the audit)\n\n" + rules + "\n";
  }
  out += "# Your reply\n\nThe item ids: " + ids + ".\n\n";
  out += kind == Kind::design ? kDesignFormat : kCodeFormat;
  out += '\n';
  return out;
}

const char* system_prompt(Kind kind) { return kind == Kind::design ? kDesignSystem : kCodeSystem; }

}  // namespace

std::vector<IntegrityRule> load_integrity_rules(const std::filesystem::path& file) {
  const auto text = file_bytes(file);
  if (!text) fail("{}: cannot read the integrity rules", file.string());
  std::vector<IntegrityRule> rules;
  std::istringstream lines(*text);
  const std::regex row(R"(^\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|)");
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, row)) rules.push_back({std::stoi(match[1]), match[2]});
  }
  if (rules.empty()) fail("{}: no numbered rule rows (| 1 | <threat> | ...) in its table", file.string());
  return rules;
}

Prompt build_prompt(const Task& task, const Subject& subject, const std::vector<std::string>& order,
                    const std::vector<IntegrityRule>& rules) {
  std::map<std::string, const GuidanceItem*> by_id;
  for (const auto& item : task.guidance.items) by_id[item.id] = &item;
  std::string items, ids;
  for (const auto& id : order) {
    const auto it = by_id.find(id);
    if (it == by_id.end()) fail("judge: item {} is not in {}'s guidance", id, task.name);
    const auto& item = *it->second;
    items += fmt::format("## {} {}\nDepends on: {}\nCheck: {}\n", item.id, item.title, depends_text(item), item.check);
    if (subject.kind == Kind::design) items += "\n" + item.rationale + "\n";
    items += '\n';
    ids += (ids.empty() ? "" : ", ") + id;
  }
  std::string task_text = task.name + ": " + task.summary + "\n\n" + task.description;
  std::string rules_text;
  for (const auto& rule : rules) rules_text += fmt::format("{}. {}\n", rule.number, rule.title);
  return {system_prompt(subject.kind), user_message(subject.kind, task_text, items, ids, render_subject(subject), rules_text)};
}

std::string retry_message(const std::vector<std::string>& problems, const std::vector<std::string>& items, bool audit_again) {
  std::string out = "Your reply could not be used as it was:\n";
  for (const auto& problem : problems) out += "- " + problem + "\n";
  if (!items.empty()) {
    std::string ids;
    for (const auto& id : items) ids += (ids.empty() ? "" : ", ") + id;
    out += "\nReply again with the same JSON format, with verdicts for these items only: " + ids + ".";
  } else {
    out += "\nReply again with the same JSON format, with an empty \"verdicts\" list.";
  }
  if (audit_again) out += " Include the \"audit\" object again.";
  out += " Quote only text that is in the subject, exactly.\n";
  return out;
}

std::string template_sha256(Kind kind) {
  return sha256_hex(std::string(system_prompt(kind)) + "\n" +
                    user_message(kind, "{task}", "{items}", "{ids}", "{subject}", "{rules}") + "\n" +
                    retry_message({"{problem}"}, {"{id}"}, kind == Kind::code));
}

}  // namespace d2k::judge
