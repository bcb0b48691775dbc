// `d2k report CAMPAIGN`: the campaign's numbers from its store (src/campaign/report.hpp) on the terminal,
// and as JSON, CSV and a self-contained HTML page when asked. Exit status 0 (the report is printed), 2 for bad usage.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "campaign/judge_import.hpp"
#include "campaign/report.hpp"
#include "campaign/report_html.hpp"
#include "campaign/report_print.hpp"
#include "campaign/store.hpp"
#include "cli/campaign_paths.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"

namespace d2k {
namespace {

struct ReportOptions {
  std::string campaign;
  std::string json;  // a file, or - for stdout
  std::string csv;   // a folder
  std::string html;  // a file
};

int run_report(const ReportOptions& o, const GlobalOptions& global) {
  const auto paths = campaign_paths(o.campaign, make_context(global.root));
  campaign::Store store(paths.store());
  campaign::ReportInput input;
  const auto info = store.campaign();
  if (!info) fail("{}: the store holds no campaign yet", paths.store().string());
  input.campaign = *info;
  input.store = paths.store().string();
  // The judge's score files in the run folders (d2k judge design|code <run folder>) join the store first.
  std::vector<std::string> warnings;
  if (const int n = campaign::import_judge_scores(store, &warnings)) std::cerr << fmt::format("d2k report: {} judge score(s) from the run folders\n", n);
  for (const auto& w : warnings) std::cerr << "d2k report: warning: " << w << "\n";
  input.runs = store.runs();
  input.evaluations = store.evaluations();
  input.judge_scores = store.judge_scores();
  const auto report = campaign::make_report(input);
  if (o.json == "-") {
    std::cout << campaign::report_json(report).dump(2) << "\n";
  } else {
    campaign::print_report(std::cout, report);
    if (!o.json.empty()) {
      std::ofstream out(o.json);
      out << campaign::report_json(report).dump(2) << "\n";
      if (!out) fail("--json: cannot write {}", o.json);
    }
  }
  if (!o.csv.empty())
    for (const auto& file : campaign::write_report_csv(report, o.csv)) std::cerr << "d2k report: wrote " << file.string() << "\n";
  if (!o.html.empty()) {
    campaign::write_report_html(report, o.html);
    std::cerr << "d2k report: wrote " << o.html << "\n";
  }
  return 0;
}

}  // namespace

Command add_report_command(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<ReportOptions>();
  auto* command = app.add_subcommand("report", "a campaign's correctness, Performance Score, speedups, paired deltas and ablation");
  command->add_option("campaign", options->campaign, "the campaign's folder, its campaign.db, or its name")->required();
  command->add_option("--json", options->json, "write the report as JSON to FILE ('-': stdout, instead of the tables)");
  command->add_option("--csv", options->csv, "write one CSV file per table into this folder");
  command->add_option("--html", options->html, "write the report as one self-contained HTML page (tables and SVG charts) to FILE");
  return {command, [options, &global] { return run_report(*options, global); }};
}

}  // namespace d2k
