// The report as one self-contained HTML page (`d2k report CAMPAIGN --html FILE`): inline CSS and SVG
// charts drawn here, no script and no network load. Its tables are report_tables() (the terminal's and
// the CSV's cells), so no format of the HTML can disagree with them; every string from the store is
// HTML-escaped.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "campaign/report.hpp"

namespace d2k::campaign {

std::string html_escape(std::string_view text);

std::string report_html(const Report& report);
void write_report_html(const Report& report, const std::filesystem::path& file);

}  // namespace d2k::campaign
