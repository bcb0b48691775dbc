#include "judge/report.hpp"

#include <fmt/format.h>

#include "core/text.hpp"

namespace d2k::judge {
namespace {

const char* short_name(Verdict v) {
  switch (v) {
    case Verdict::met: return "met";
    case Verdict::partly_met: return "partly";
    case Verdict::not_met: return "not";
  }
  return "?";
}

}  // namespace

void print_judgement(std::ostream& out, const Task& task, Kind kind, const Judgement& j, const std::string& model,
                     const std::string& score_file) {
  out << fmt::format("judge {}: {} by {} ({} of {} samples)\n", name_of(kind), task.name, printable(model, 60),
                     j.samples.size(), j.document.value("judge", nlohmann::json::object()).value("samples", 0));
  std::string header = fmt::format("{:<6} {:<44}", "item", "title");
  for (const auto& sample : j.samples) header += fmt::format(" {:>7}", fmt::format("s{}", sample.index + 1));
  header += fmt::format(" {:>7} {:>6}", "credit", "agree");
  out << header << '\n';
  for (const auto& item : task.guidance.items) {
    std::string title = item.title.size() > 44 ? item.title.substr(0, 41) + "..." : item.title;
    std::string row = fmt::format("{:<6} {:<44}", item.id, title);
    for (const auto& sample : j.samples)
      for (const auto& v : sample.verdicts)
        if (v.id == item.id) row += fmt::format(" {:>7}", std::string(short_name(v.verdict)) + (v.flags.empty() ? "" : "!"));
    const auto credit = j.score.credit.find(item.id);
    row += credit == j.score.credit.end() ? fmt::format(" {:>7}", "-") : fmt::format(" {:>7.2f}", credit->second);
    const auto agree = j.agreement.items.find(item.id);
    row += agree == j.agreement.items.end() ? fmt::format(" {:>6}", "-") : fmt::format(" {:>6.2f}", agree->second);
    out << row << '\n';
  }
  if (j.samples.empty()) {
    out << "score: none (no sample finished)\n";
  } else {
    std::string levels, samples;
    for (const auto& [level, value] : j.score.levels) levels += fmt::format("{}L{} {:.1f}", levels.empty() ? "" : ", ", level, value);
    for (double s : j.score.samples) samples += fmt::format(" {:.1f}", s);
    out << fmt::format("score {:.1f} of 100 ({}); samples:{}\n", j.score.score, levels, samples);
    out << fmt::format("agreement: mean per item {:.2f}, Fleiss' kappa {}{}\n", j.agreement.mean,
                       j.agreement.kappa ? fmt::format("{:.2f}", *j.agreement.kappa) : "undefined (one verdict throughout)",
                       j.agreement.flagged ? "; FLAGGED: " + j.agreement.why : "");
  }
  if (kind == Kind::code && j.document.contains("audit")) {
    const auto& audit = j.document["audit"];
    if (audit["verdict"] == "clean") {
      out << fmt::format("audit: clean in {} samples\n", audit["samples"].get<int>());
    } else {
      out << fmt::format("audit: SUSPECTED REWARD HACK in {} of {} samples (a person confirms)\n", audit["suspected_in"].get<int>(),
                         audit["samples"].get<int>());
      for (const auto& f : audit["findings"]) {
        out << fmt::format("  sample {}: rule {} ({}): {}\n", f["sample"].get<int>() + 1, f["rule"].get<int>(),
                           f["rule_title"].get<std::string>(), printable(f["reason"].get<std::string>(), 300));
        for (const auto& quote : f["evidence"]) out << "    > " << printable(quote.get<std::string>(), 300) << '\n';
      }
    }
  }
  for (const auto& flag : j.flags) out << "flag: " << printable(flag, 300) << '\n';
  out << fmt::format("tokens: {} input ({} cached), {} output in {} requests; cost ${:.4f}\n", j.usage.input_tokens,
                     j.usage.cached_input_tokens, j.usage.output_tokens, j.usage.requests, j.usage.cost_usd);
  out << "score file: " << score_file << '\n';
}

}  // namespace d2k::judge
