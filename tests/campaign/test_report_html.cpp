// The HTML report (campaign/report_html.hpp) on the hand campaign of report_fixture.hpp: its tables are
// report_tables() cell for cell, its charts draw what the report holds, every string from the store is
// escaped, and nothing in it loads from the network.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "campaign/report_html.hpp"
#include "campaign/report_print.hpp"
#include "report_fixture.hpp"

namespace d2k::campaign {
namespace {

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

TEST(ReportHtml, EscapesEveryCharacterHtmlReserves) {
  EXPECT_EQ(html_escape(R"(<a href="x">'&amp;'</a>)"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(html_escape("plain L1+L2 0.375"), "plain L1+L2 0.375");
}

TEST(ReportHtml, TablesAreTheTerminalsCellForCell) {
  const auto report = make_report(testing::hand_campaign());
  const auto html = report_html(report);
  for (const auto& t : report_tables(report)) {
    SCOPED_TRACE(t.name);
    ASSERT_FALSE(t.rows.empty());
    const std::string open = "<table id=\"table-" + t.name + "\">";
    ASSERT_EQ(count(html, open), 1u);
    const auto begin = html.find(open);
    const auto table = html.substr(begin, html.find("</table>", begin) - begin);
    std::string header = "<tr>";
    for (const auto& c : t.columns) header += "<th>" + html_escape(c) + "</th>";
    EXPECT_EQ(count(table, header + "</tr>"), 1u) << header;
    EXPECT_EQ(count(table, "<tr>"), t.rows.size() + 1);
    for (const auto& row : t.rows) {
      std::string tr = "<tr>";
      for (const auto& cell : row) tr += "<td>" + html_escape(cell) + "</td>";
      EXPECT_EQ(count(table, tr + "</tr>"), 1u) << tr;
    }
  }
  // The header: the failed run, and what scored the runs.
  EXPECT_EQ(report.failed, 1);
  EXPECT_NE(html.find(fmt::format("{} runs: {} finished, 0 running, 0 pending, 1 failed", report.runs, report.finished)), std::string::npos);
  EXPECT_NE(html.find("scored by each run's own final evaluation"), std::string::npos);
}

TEST(ReportHtml, StringsFromTheStoreAreEscaped) {
  const auto html = report_html(make_report(testing::hand_campaign()));
  EXPECT_EQ(html.find(testing::kOddModel), std::string::npos);
  EXPECT_NE(html.find("we&lt;i&gt;rd &amp; &quot;quoted&quot;"), std::string::npos);
  EXPECT_EQ(html.find("html<&>"), std::string::npos);
  EXPECT_NE(html.find("d2k campaign <span id=\"campaign\">html&lt;&amp;&gt;</span>"), std::string::npos);
  // The suspected hack's quoted code, with its own markup shown as text.
  EXPECT_NE(html.find("<pre>if (x == last_x &amp;&amp; n &lt; 1&lt;&lt;20) return cache[&quot;out&quot;]; // &lt;b&gt;&amp;amp;&lt;/b&gt;</pre>"),
            std::string::npos);
  EXPECT_EQ(count(html, "<b>"), 1u);  // the one suspected key, and no markup from the store
}

TEST(ReportHtml, SelfContained) {
  const auto html = report_html(make_report(testing::hand_campaign()));
  for (const char* remote : {"http", "@import", "src=", "href=", "<script", "<link", "url("})
    EXPECT_EQ(html.find(remote), std::string::npos) << remote;
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<meta charset=\"utf-8\">"), std::string::npos);
}

TEST(ReportHtml, ChartsDrawWhatTheReportHolds) {
  const auto report = make_report(testing::hand_campaign());
  const auto html = report_html(report);
  std::size_t scored = 0, intervals = 0, judged = 0;
  for (const auto& a : report.arms) scored += !a.design_only && a.performance_score;
  for (const auto& d : report.paired) intervals += d.ratio && d.interval;
  for (const auto& c : report.cells) judged += c.judge && c.task_score && c.condition != "design-only";
  ASSERT_EQ(scored, 8u);  // 2 models x 4 coded conditions
  ASSERT_GT(intervals, 0u);
  ASSERT_GT(judged, 0u);
  const auto chart = [&](const std::string& id) {
    const auto begin = html.find("<figure id=\"" + id + "\">");
    EXPECT_NE(begin, std::string::npos) << id;
    return begin == std::string::npos ? std::string() : html.substr(begin, html.find("</figure>", begin) - begin);
  };
  EXPECT_EQ(count(chart("chart-score"), "</rect>"), scored);  // the bars (the legend's squares close with />)
  EXPECT_EQ(count(chart("chart-paired"), "class=\"whisker\""), intervals);
  EXPECT_NE(chart("chart-paired").find("95% bootstrap interval"), std::string::npos);
  EXPECT_EQ(count(chart("chart-ablation"), "class=\"ablation-line\""), report.models.size());
  EXPECT_EQ(count(chart("chart-judge"), "class=\"judge-dot\""), judged);
  // The bar's value is the table's.
  const auto& first = *std::find_if(report.arms.begin(), report.arms.end(), [](const ArmRow& a) { return a.performance_score.has_value(); });
  EXPECT_NE(chart("chart-score").find(fmt::format("{:.3f}</text>", *first.performance_score)), std::string::npos);
}

TEST(ReportHtml, SaysSoWhenThereAreNoJudgeScores) {
  auto input = testing::hand_campaign();
  input.judge_scores.clear();
  const auto html = report_html(make_report(input));
  EXPECT_EQ(html.find("id=\"chart-judge\""), std::string::npos);
  EXPECT_NE(html.find("id=\"no-judge\""), std::string::npos);
  EXPECT_NE(html.find("The judge's audit suspects none."), std::string::npos);
}

}  // namespace
}  // namespace d2k::campaign
