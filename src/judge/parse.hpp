// A judge's reply, parsed strictly: one JSON object (bare, or alone in one ```json fence) with a verdict for
// every item asked about, each quote found in the subject, and for code a well-formed audit. What is wrong
// is listed, item by item, so that the sample can ask again for exactly those items (judge/judge.hpp).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "judge/quote.hpp"
#include "judge/verdict.hpp"

namespace d2k::judge {

struct ParsedReply {
  std::map<std::string, ItemVerdict> verdicts;  // the usable verdicts of the items asked about
  std::optional<Audit> audit;                   // code: a usable audit
  // Every problem, as a sentence the retry message repeats to the judge and the sample records.
  std::vector<std::string> problems;
  // Items asked about with no usable verdict, and why (the flag they get if the retry does not fix them):
  // "missing", "invalid: <why>", "fabricated_quote: <the quote>".
  std::map<std::string, std::string> unusable;
  std::string audit_unusable;  // code: why the audit cannot be used; "" when it can (or is not asked for)
  bool json = false;           // the reply held the one JSON object asked for
};

// `asked`: the item ids this reply must judge (all of them, or those a retry asks again); `known`: every
// id of the task's guidance (an id among them that was not asked is ignored, one outside them is
// unknown); `audit`: whether an audit is asked for (code); `rules`: the number of integrity rules.
ParsedReply parse_reply(const std::string& text, const std::vector<std::string>& asked, const std::vector<std::string>& known,
                        const QuoteIndex& quotes, bool audit, int rules);

// The JSON text of a reply: the whole text, or the body of its one fenced block. None when neither.
std::optional<std::string> reply_json_text(const std::string& text);

}  // namespace d2k::judge
