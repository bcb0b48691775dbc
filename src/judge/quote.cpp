#include "judge/quote.hpp"

#include <fmt/format.h>

namespace d2k::judge {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

std::string normalize_whitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (char c : text) {
    if (is_space(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

QuoteIndex::QuoteIndex(const Subject& subject) : design_(subject.kind == Kind::design) {
  for (const auto& file : subject.files) files_.push_back(normalize_whitespace(file.text));
}

std::string QuoteIndex::problem(std::string_view quote) const {
  const auto normalized = normalize_whitespace(quote);
  if (normalized.size() < kMinQuoteChars)
    return fmt::format("the quote \"{}\" is shorter than {} characters", normalized, kMinQuoteChars);
  for (const auto& file : files_)
    if (file.find(normalized) != std::string::npos) return "";
  return fmt::format("the quote \"{}\" is not in the {}", normalized.size() > 120 ? normalized.substr(0, 117) + "..." : normalized,
                     design_ ? "design" : "code");
}

}  // namespace d2k::judge
