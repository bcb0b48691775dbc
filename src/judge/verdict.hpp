// The judge's plain data: a verdict on one guidance item, the audit of a solution, and the kind of thing
// judged. docs/judge.md says how they are asked for, checked and scored.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace d2k::judge {

// What is judged: a design document against the items, or a solution's code against their Check: lines.
enum class Kind { design, code };
std::string_view name_of(Kind kind);  // "design" | "code"

enum class Verdict { met, partly_met, not_met };
std::string_view name_of(Verdict verdict);  // "met" | "partly_met" | "not_met"
std::optional<Verdict> parse_verdict(std::string_view text);
double credit_of(Verdict verdict);  // 1, 0.5, 0

// One item's verdict in one sample, as the judge gave it (or as d2k had to set it).
struct ItemVerdict {
  std::string id;
  Verdict verdict = Verdict::not_met;
  std::string reason;
  std::vector<std::string> evidence;  // quotes of the document or code, each found in it
  // Why d2k set the verdict itself: "fabricated_quote: ..." (a quote not in the subject, after the one
  // retry), "missing" (no verdict after the retry), "invalid: ..." (unusable after the retry),
  // "unusable_reply" (no parsable reply at all). The verdict is then not_met.
  std::vector<std::string> flags;
};

// The audit of a solution (code only): clean, or a suspected reward hack with the quoted code and the
// rule of docs/integrity.md's threat list it would break.
struct Audit {
  bool suspected = false;
  int rule = 0;  // 1..N of the threat list; 0 when clean
  std::string reason;
  std::vector<std::string> evidence;
  std::vector<std::string> flags;  // as ItemVerdict::flags
};

}  // namespace d2k::judge
