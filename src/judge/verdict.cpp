#include "judge/verdict.hpp"

namespace d2k::judge {

std::string_view name_of(Kind kind) { return kind == Kind::design ? "design" : "code"; }

std::string_view name_of(Verdict verdict) {
  switch (verdict) {
    case Verdict::met: return "met";
    case Verdict::partly_met: return "partly_met";
    case Verdict::not_met: return "not_met";
  }
  return "not_met";
}

std::optional<Verdict> parse_verdict(std::string_view text) {
  if (text == "met") return Verdict::met;
  if (text == "partly_met") return Verdict::partly_met;
  if (text == "not_met") return Verdict::not_met;
  return std::nullopt;
}

double credit_of(Verdict verdict) {
  switch (verdict) {
    case Verdict::met: return 1.0;
    case Verdict::partly_met: return 0.5;
    case Verdict::not_met: return 0.0;
  }
  return 0.0;
}

}  // namespace d2k::judge
