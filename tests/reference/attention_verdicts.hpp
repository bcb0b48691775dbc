// The attention tasks' tolerance tests (prefill, sliding window, paged decode, MLA decode) each run a list
// of candidate kernels' arithmetics through the task's check: what each verdict says of o and lse,
// printed so the margins show in the log, and held to whether each output should pass.
#pragma once

#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <string>

#include "reference/check.hpp"

namespace d2k {

// "label: o nmse ... worst ... (n over) lse ...; passed" (or the verdict's message).
inline void print_verdict(const std::string& label, const Verdict& verdict) {
  std::cout << label << ":";
  for (const auto& c : verdict.comparisons)
    std::cout << " " << c.name << " nmse " << c.nmse << " worst " << c.worst_excess << " (" << c.mismatches << " over)";
  std::cout << "; " << (verdict.status == Status::passed ? "passed" : verdict.message) << "\n";
}

// A candidate's verdict: o and lse each pass or fail as expected, and the whole passes only if both do.
inline void expect_o_and_lse(const std::string& label, const Verdict& verdict, bool o_passes, bool lse_passes) {
  print_verdict(label, verdict);
  std::map<std::string, bool> passed;
  for (const auto& c : verdict.comparisons) passed[c.name] = c.passed;
  EXPECT_EQ(passed["o"], o_passes) << label << ": " << verdict.message;
  EXPECT_EQ(passed["lse"], lse_passes) << label << ": " << verdict.message;
  EXPECT_EQ(verdict.status, o_passes && lse_passes ? Status::passed : Status::incorrect_numerics) << label;
}

}  // namespace d2k
