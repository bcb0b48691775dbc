// Evidence: every quote a judge gives must really be in the subject. A quote counts as found when, with
// runs of whitespace made one space and the ends trimmed on both sides, it is a substring of one file.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "judge/subject.hpp"

namespace d2k::judge {

// A quote shorter than this (after normalization) is not evidence: "fp32" is found in any kernel.
constexpr std::size_t kMinQuoteChars = 8;

// Runs of whitespace (space, tab, newline, CR, FF, VT) made one space, leading and trailing ones dropped.
std::string normalize_whitespace(std::string_view text);

class QuoteIndex {
 public:
  explicit QuoteIndex(const Subject& subject);
  // Why the quote is not evidence ("shorter than 8 characters", "not in the document"), or "" when it is.
  std::string problem(std::string_view quote) const;

 private:
  std::vector<std::string> files_;  // normalized
  bool design_ = true;
};

}  // namespace d2k::judge
