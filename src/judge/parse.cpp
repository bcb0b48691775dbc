#include "judge/parse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

namespace d2k::judge {
namespace {

using nlohmann::json;

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

// The quotes of an "evidence" field: why it is unusable, or "" (and the quotes) when every one is a string.
std::string read_evidence(const json& entry, std::vector<std::string>& quotes) {
  if (!entry.contains("evidence") || entry["evidence"].is_null()) return "";
  const auto& evidence = entry["evidence"];
  if (evidence.is_string()) {
    quotes.push_back(evidence.get<std::string>());
    return "";
  }
  if (!evidence.is_array()) return "\"evidence\" is not a list of quotes";
  for (const auto& quote : evidence) {
    if (!quote.is_string()) return "\"evidence\" holds something that is not a quote (a string)";
    quotes.push_back(quote.get<std::string>());
  }
  return "";
}

// The first quote that is not evidence: "fabricated_quote: <why>", or "" when all are.
std::string check_quotes(const std::vector<std::string>& quotes, const QuoteIndex& index) {
  for (const auto& quote : quotes)
    if (auto why = index.problem(quote); !why.empty()) return "fabricated_quote: " + why;
  return "";
}

std::string reason_of(const json& entry) {
  if (!entry.contains("reason") || !entry["reason"].is_string()) return "";
  return trim(entry["reason"].get<std::string>());
}

void parse_audit(const json& object, const QuoteIndex& quotes, int rules, ParsedReply& reply) {
  if (!object.contains("audit")) {
    reply.audit_unusable = "missing";
    reply.problems.push_back("the \"audit\" object is missing");
    return;
  }
  const auto& audit_json = object["audit"];
  const auto bad = [&](const std::string& why) {
    reply.audit_unusable = "invalid: " + why;
    reply.problems.push_back("the audit: " + why);
  };
  if (!audit_json.is_object()) return bad("\"audit\" is not an object");
  if (!audit_json.contains("verdict") || !audit_json["verdict"].is_string())
    return bad("no \"verdict\" string (\"clean\" or \"suspected_hack\")");
  const auto verdict = audit_json["verdict"].get<std::string>();
  Audit audit;
  audit.reason = reason_of(audit_json);
  if (verdict == "clean") {
    reply.audit = audit;
    return;
  }
  if (verdict != "suspected_hack") return bad(fmt::format("verdict \"{}\" is neither \"clean\" nor \"suspected_hack\"", verdict));
  audit.suspected = true;
  const auto& rule = audit_json.contains("rule") ? audit_json["rule"] : json();
  if (!rule.is_number_integer() || rule.get<int64_t>() < 1 || rule.get<int64_t>() > rules)
    return bad(fmt::format("a suspected hack needs \"rule\": the number of an integrity rule, 1 to {} (got {})", rules, rule.dump()));
  audit.rule = rule.get<int>();
  if (audit.reason.empty()) return bad("a suspected hack needs a \"reason\"");
  if (auto why = read_evidence(audit_json, audit.evidence); !why.empty()) return bad(why);
  if (audit.evidence.empty()) return bad("a suspected hack needs the code quoted in \"evidence\"");
  if (auto why = check_quotes(audit.evidence, quotes); !why.empty()) {
    reply.audit_unusable = why;
    reply.problems.push_back("the audit: " + why.substr(std::string("fabricated_quote: ").size()));
    return;
  }
  reply.audit = audit;
}

}  // namespace

std::optional<std::string> reply_json_text(const std::string& text) {
  const auto body = trim(text);
  if (body.rfind("```", 0) != 0) return body;
  const auto line_end = body.find('\n');
  if (line_end == std::string::npos) return std::nullopt;
  const auto info = trim(body.substr(3, line_end - 3));
  if (!info.empty() && info != "json") return std::nullopt;
  const auto close = body.rfind("```");
  if (close <= line_end || close + 3 != body.size()) return std::nullopt;
  const auto inner = body.substr(line_end + 1, close - line_end - 1);
  if (inner.find("```") != std::string::npos) return std::nullopt;  // more than one block
  return inner;
}

ParsedReply parse_reply(const std::string& text, const std::vector<std::string>& asked, const std::vector<std::string>& known,
                        const QuoteIndex& quotes, bool audit, int rules) {
  ParsedReply reply;
  const auto all_unusable = [&](const std::string& problem) {
    reply.problems.push_back(problem);
    for (const auto& id : asked) reply.unusable[id] = "missing";
    if (audit) reply.audit_unusable = "missing";
    return reply;
  };
  const auto body = reply_json_text(text);
  if (!body) return all_unusable("the reply is not one JSON object (bare, or alone in a ```json block)");
  const auto object = json::parse(*body, nullptr, false);
  if (object.is_discarded()) return all_unusable("the reply is not valid JSON");
  if (!object.is_object()) return all_unusable("the reply's JSON is not an object");
  if (!object.contains("verdicts") || !object["verdicts"].is_array())
    return all_unusable("the reply has no \"verdicts\" list");
  reply.json = true;

  const std::set<std::string> asked_set(asked.begin(), asked.end()), known_set(known.begin(), known.end());
  std::set<std::string> seen;
  for (const auto& entry : object["verdicts"]) {
    if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_string()) {
      reply.problems.push_back(fmt::format("a verdict without an \"id\" string: {}", entry.dump().substr(0, 200)));
      continue;
    }
    const auto id = entry["id"].get<std::string>();
    if (!known_set.count(id)) {
      reply.problems.push_back(fmt::format("\"{}\" is not an item id", id.substr(0, 60)));
      continue;
    }
    if (!asked_set.count(id)) continue;  // an item not asked again: its first answer stands
    if (!seen.insert(id).second) {
      reply.problems.push_back(fmt::format("{} has more than one verdict", id));
      reply.verdicts.erase(id);
      reply.unusable[id] = "invalid: more than one verdict";
      continue;
    }
    const auto invalid = [&](const std::string& why) {
      reply.problems.push_back(fmt::format("{}: {}", id, why));
      reply.unusable[id] = "invalid: " + why;
    };
    ItemVerdict verdict;
    verdict.id = id;
    const auto value = entry.contains("verdict") && entry["verdict"].is_string() ? parse_verdict(entry["verdict"].get<std::string>())
                                                                                  : std::nullopt;
    if (!value) {
      invalid(fmt::format("\"verdict\" must be \"met\", \"partly_met\" or \"not_met\", not {}",
                          entry.contains("verdict") ? entry["verdict"].dump().substr(0, 60) : "missing"));
      continue;
    }
    verdict.verdict = *value;
    verdict.reason = reason_of(entry);
    if (verdict.reason.empty()) {
      invalid("no \"reason\"");
      continue;
    }
    if (auto why = read_evidence(entry, verdict.evidence); !why.empty()) {
      invalid(why);
      continue;
    }
    if (verdict.verdict != Verdict::not_met && verdict.evidence.empty()) {
      invalid(fmt::format("\"{}\" needs at least one quote in \"evidence\"", name_of(verdict.verdict)));
      continue;
    }
    if (auto why = check_quotes(verdict.evidence, quotes); !why.empty()) {
      reply.problems.push_back(fmt::format("{}: {}", id, why.substr(std::string("fabricated_quote: ").size())));
      reply.unusable[id] = why;
      continue;
    }
    reply.verdicts[id] = std::move(verdict);
  }
  for (const auto& id : asked) {
    if (reply.verdicts.count(id) || reply.unusable.count(id)) continue;
    reply.problems.push_back(fmt::format("{} has no verdict", id));
    reply.unusable[id] = "missing";
  }
  if (audit) parse_audit(object, quotes, rules, reply);
  return reply;
}

}  // namespace d2k::judge
