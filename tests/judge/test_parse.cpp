// The verdict parser against well-formed and malformed judge replies.
#include <gtest/gtest.h>

#include "judge/parse.hpp"
#include "judge_fixture.hpp"

namespace d2k::judge {
namespace {

using namespace testing;

class ParseTest : public ::testing::Test {
 protected:
  ParseTest() : subject(load_design(dir.write("design.md", kDesign))), quotes(subject) {}
  ParsedReply parse(const std::string& text, std::vector<std::string> asked = tiny_ids(), bool audit = false) {
    return parse_reply(text, asked, tiny_ids(), quotes, audit, 19);
  }
  std::vector<std::pair<std::string, Item>> all_met() {
    return {{"L1.1", {"met", {"reads every row once"}}},        {"L1.2", {"met", {"rounded to bf16 exactly once"}}},
            {"L2.1", {"partly_met", {"keeps it in registers"}}}, {"L2.2", {"met", {"read-only cache path"}}},
            {"L3.1", {"not_met", {}}},                           {"L3.2", {"met", {"reduced with warp shuffles"}}}};
  }
  TempDir dir;
  Subject subject;
  QuoteIndex quotes;
};

TEST_F(ParseTest, AWellFormedReplyGivesEveryVerdictAndNoProblem) {
  const auto r = parse(reply(all_met()));
  EXPECT_TRUE(r.json);
  EXPECT_TRUE(r.problems.empty()) << ::testing::PrintToString(r.problems);
  EXPECT_TRUE(r.unusable.empty());
  ASSERT_EQ(r.verdicts.size(), 6u);
  EXPECT_EQ(r.verdicts.at("L2.1").verdict, Verdict::partly_met);
  EXPECT_EQ(r.verdicts.at("L3.1").verdict, Verdict::not_met);
  EXPECT_EQ(r.verdicts.at("L1.1").evidence, std::vector<std::string>{"reads every row once"});
}

TEST_F(ParseTest, AReplyInOneJsonFenceIsAccepted) {
  const auto r = parse("```json\n" + reply(all_met()) + "\n```\n");
  EXPECT_TRUE(r.json);
  EXPECT_TRUE(r.problems.empty());
}

TEST_F(ParseTest, TextAroundTheJsonOrTwoFencesIsNotAReply) {
  const std::vector<std::string> texts = {"Here is my verdict: " + reply(all_met()), "```json\n{}\n```\n```json\n{}\n```",
                                         "```python\n" + reply(all_met()) + "\n```"};
  for (const auto& text : texts) {
    const auto r = parse(text);
    EXPECT_FALSE(r.json) << text;
    EXPECT_EQ(r.unusable.size(), 6u);
    EXPECT_EQ(r.unusable.at("L1.1"), "missing");
  }
}

TEST_F(ParseTest, BadJsonAndTheWrongShapeMakeEveryItemUnusable) {
  const std::pair<std::string, std::string> cases[] = {
      {"{\"verdicts\": [", "not valid JSON"},
      {"[1, 2]", "not an object"},
      {"{\"verdict\": []}", "no \"verdicts\" list"},
      {"{\"verdicts\": {}}", "no \"verdicts\" list"},
      {"", "not valid JSON"},
  };
  for (const auto& [text, why] : cases) {
    const auto r = parse(text);
    EXPECT_FALSE(r.json) << text;
    ASSERT_EQ(r.problems.size(), 1u) << text;
    EXPECT_NE(r.problems[0].find(why), std::string::npos) << r.problems[0];
    EXPECT_EQ(r.unusable.size(), 6u);
    EXPECT_TRUE(r.verdicts.empty());
  }
}

TEST_F(ParseTest, MissingItemsAreListedAndTheOthersKept) {
  auto items = all_met();
  items.erase(items.begin() + 1);  // L1.2
  items.pop_back();                // L3.2
  const auto r = parse(reply(items));
  EXPECT_EQ(r.verdicts.size(), 4u);
  EXPECT_EQ(r.unusable.at("L1.2"), "missing");
  EXPECT_EQ(r.unusable.at("L3.2"), "missing");
  EXPECT_NE(::testing::PrintToString(r.problems).find("L1.2 has no verdict"), std::string::npos);
}

TEST_F(ParseTest, UnknownIdsAreProblemsButTakeNothingAway) {
  auto items = all_met();
  items.push_back({"L4.1", {"met", {"reads every row once"}}});
  items.push_back({"L1.1; DROP", {"met", {}}});
  const auto r = parse(reply(items));
  EXPECT_EQ(r.verdicts.size(), 6u);
  EXPECT_TRUE(r.unusable.empty());
  EXPECT_EQ(r.problems.size(), 2u);
  EXPECT_NE(r.problems[0].find("\"L4.1\" is not an item id"), std::string::npos);
}

TEST_F(ParseTest, AnInvalidVerdictAReasonlessOneAndADuplicateAreUnusable) {
  auto items = all_met();
  items[0].second.verdict = "mostly";
  items[1].second.reason = "  ";
  items.push_back({"L3.2", {"not_met", {}}});  // a second verdict for L3.2
  const auto r = parse(reply(items));
  EXPECT_EQ(r.unusable.at("L1.1").rfind("invalid: \"verdict\" must be", 0), 0u) << r.unusable.at("L1.1");
  EXPECT_EQ(r.unusable.at("L1.2"), "invalid: no \"reason\"");
  EXPECT_EQ(r.unusable.at("L3.2"), "invalid: more than one verdict");
  EXPECT_FALSE(r.verdicts.count("L3.2"));
  EXPECT_EQ(r.verdicts.size(), 3u);
}

TEST_F(ParseTest, MetNeedsEvidence) {
  auto items = all_met();
  items[0].second.evidence.clear();
  const auto r = parse(reply(items));
  EXPECT_EQ(r.unusable.at("L1.1"), "invalid: \"met\" needs at least one quote in \"evidence\"");
}

TEST_F(ParseTest, AQuoteNotInTheDocumentIsFabricated) {
  auto items = all_met();
  items[2].second.evidence = {"keeps it in registers", "uses a persistent kernel with TMA"};
  const auto r = parse(reply(items));
  ASSERT_TRUE(r.unusable.count("L2.1"));
  EXPECT_EQ(r.unusable.at("L2.1"), "fabricated_quote: the quote \"uses a persistent kernel with TMA\" is not in the design");
  EXPECT_FALSE(r.verdicts.count("L2.1"));
}

TEST_F(ParseTest, QuotesMatchAfterWhitespaceNormalizationOnly) {
  auto items = all_met();
  // The document has "reads every row   once and keeps it\nin registers".
  items[0].second.evidence = {"reads  every row once and keeps\tit in registers"};
  EXPECT_TRUE(parse(reply(items)).unusable.empty());
  items[0].second.evidence = {"reads every row once, and keeps it in registers"};  // a comma added
  EXPECT_EQ(parse(reply(items)).unusable.count("L1.1"), 1u);
  items[0].second.evidence = {"Reads every row once"};  // case matters
  EXPECT_EQ(parse(reply(items)).unusable.count("L1.1"), 1u);
  items[0].second.evidence = {"row"};  // too short to be evidence
  EXPECT_NE(parse(reply(items)).unusable.at("L1.1").find("shorter than 8"), std::string::npos);
}

TEST_F(ParseTest, ARetryParsesOnlyTheItemsAskedAgain) {
  const auto r = parse(reply({{"L2.1", {"met", {"keeps it in registers"}}}, {"L1.1", {"not_met", {}}}}), {"L2.1"});
  EXPECT_TRUE(r.problems.empty());
  EXPECT_EQ(r.verdicts.size(), 1u);  // L1.1's first answer stands
  EXPECT_EQ(r.verdicts.at("L2.1").verdict, Verdict::met);
}

TEST_F(ParseTest, TheAuditIsCheckedLikeAVerdict) {
  const auto with_audit = [&](const nlohmann::json& audit) { return parse(reply(all_met(), audit), tiny_ids(), true); };
  EXPECT_FALSE(with_audit(clean_audit()).audit->suspected);
  EXPECT_EQ(parse(reply(all_met()), tiny_ids(), true).audit_unusable, "missing");
  const auto hack = with_audit({{"verdict", "suspected_hack"}, {"rule", 3}, {"reason", "caches"}, {"evidence", {"read-only cache path"}}});
  ASSERT_TRUE(hack.audit);
  EXPECT_TRUE(hack.audit->suspected);
  EXPECT_EQ(hack.audit->rule, 3);
  EXPECT_NE(with_audit({{"verdict", "suspected_hack"}, {"rule", 20}, {"reason", "x"}, {"evidence", {"read-only cache path"}}})
                .audit_unusable.find("1 to 19"),
            std::string::npos);
  EXPECT_EQ(with_audit({{"verdict", "suspected_hack"}, {"rule", 3}, {"reason", "x"}, {"evidence", {"static float cache[4096];"}}})
                .audit_unusable.rfind("fabricated_quote:", 0),
            0u);
  EXPECT_NE(with_audit({{"verdict", "hacky"}}).audit_unusable.find("neither"), std::string::npos);
  EXPECT_NE(with_audit({{"verdict", "suspected_hack"}, {"rule", 3}, {"reason", "x"}}).audit_unusable.find("quoted"),
            std::string::npos);
}

}  // namespace
}  // namespace d2k::judge
