// The report for people (the terminal), for machines (JSON) and for spreadsheets (CSV: one file per
// table). Printers read a Report and never compute a number of their own.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "campaign/report.hpp"

namespace d2k::campaign {

// A table as text cells: what the terminal and the CSV files both print.
struct TextTable {
  std::string name;  // the CSV file's stem: arms, cells, tasks, paired, ablation, all_correct
  std::string title;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};

std::vector<TextTable> report_tables(const Report& report);

void print_report(std::ostream& out, const Report& report);
nlohmann::json report_json(const Report& report);
// Writes <dir>/<table>.csv for every table; returns the files written.
std::vector<std::filesystem::path> write_report_csv(const Report& report, const std::filesystem::path& dir);

std::string csv_line(const std::vector<std::string>& cells);

}  // namespace d2k::campaign
