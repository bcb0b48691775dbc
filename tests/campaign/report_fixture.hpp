// A hand campaign for the report's printers (test_report_html.cpp) and the HTML end-to-end test
// (d2k-report-store writes it into a store for `d2k report --html`): two models, one named with HTML's
// special characters, three tasks, the four ablation conditions and design-only, two repeats, seeded
// random timings, judge scores, a suspected reward hack quoting code, and one failed run.
#pragma once

#include <filesystem>

#include "campaign/report.hpp"

namespace d2k::campaign::testing {

inline constexpr const char* kOddModel = R"(we<i>rd & "quoted")";

ReportInput hand_campaign();
// Writes the campaign into a new store at `file` through the Store's own writes.
void write_store(const ReportInput& input, const std::filesystem::path& file);

}  // namespace d2k::campaign::testing
