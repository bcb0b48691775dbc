// Agreement between samples: Fleiss' P_i and kappa against hand-worked examples, and the bar.
#include <gtest/gtest.h>

#include "judge/agreement.hpp"

namespace d2k::judge {
namespace {

constexpr auto M = Verdict::met, P = Verdict::partly_met, N = Verdict::not_met;

TEST(JudgeAgreement, PerItemAgreementIsTheShareOfAgreeingPairs) {
  EXPECT_DOUBLE_EQ(subject_agreement({3, 0, 0}), 1.0);      // all three pairs agree
  EXPECT_DOUBLE_EQ(subject_agreement({2, 1, 0}), 1.0 / 3);  // one pair of three
  EXPECT_DOUBLE_EQ(subject_agreement({1, 1, 1}), 0.0);
  EXPECT_DOUBLE_EQ(subject_agreement({2, 2, 0}), 1.0 / 3);  // 4 raters: 2 of 6 pairs
}

// Worked by hand. Three samples, four items:
//   A: met met met          counts (3,0,0)  P_A = (9 - 3) / 6 = 1
//   B: met met partly       counts (2,1,0)  P_B = (4 + 1 - 3) / 6 = 1/3
//   C: not not not          counts (0,0,3)  P_C = 1
//   D: met partly not       counts (1,1,1)  P_D = (3 - 3) / 6 = 0
// P_bar = (1 + 1/3 + 1 + 0) / 4 = 7/12. Shares of the 12 ratings: met 6, partly 2, not 4, so
// P_e = (1/2)^2 + (1/6)^2 + (1/3)^2 = 14/36 = 7/18, and kappa = (7/12 - 7/18) / (1 - 7/18) = 7/22.
TEST(JudgeAgreement, FleissKappaOfAHandWorkedExample) {
  const auto kappa = fleiss_kappa({{3, 0, 0}, {2, 1, 0}, {0, 0, 3}, {1, 1, 1}});
  ASSERT_TRUE(kappa);
  EXPECT_NEAR(*kappa, 7.0 / 22, 1e-12);

  const std::vector<std::map<std::string, Verdict>> samples = {
      {{"A", M}, {"B", M}, {"C", N}, {"D", M}},
      {{"A", M}, {"B", M}, {"C", N}, {"D", P}},
      {{"A", M}, {"B", P}, {"C", N}, {"D", N}},
  };
  const auto a = agreement_of(samples, {80, 70, 60});
  EXPECT_NEAR(*a.kappa, 7.0 / 22, 1e-12);
  EXPECT_NEAR(a.mean, 7.0 / 12, 1e-12);
  EXPECT_DOUBLE_EQ(a.items.at("B"), 1.0 / 3);
  EXPECT_DOUBLE_EQ(a.items.at("D"), 0.0);
  EXPECT_DOUBLE_EQ(a.score_range, 20.0);
  EXPECT_TRUE(a.flagged);  // 7/12 < 0.6
  EXPECT_NE(a.why.find("0.58 is below 0.60"), std::string::npos) << a.why;
}

// The example of Fleiss (1971) as Wikipedia works it: 10 subjects, 14 raters, 5 categories; kappa 0.210.
TEST(JudgeAgreement, FleissKappaOfThePublishedExample) {
  const auto kappa = fleiss_kappa({{0, 0, 0, 0, 14}, {0, 2, 6, 4, 2}, {0, 0, 3, 5, 6}, {0, 3, 9, 2, 0}, {2, 2, 8, 1, 1},
                                   {7, 7, 0, 0, 0}, {3, 2, 6, 3, 0}, {2, 5, 3, 2, 2}, {6, 5, 2, 1, 0}, {0, 2, 2, 3, 7}});
  ASSERT_TRUE(kappa);
  EXPECT_NEAR(*kappa, 0.2099, 5e-4);
}

TEST(JudgeAgreement, KappaIsUndefinedWhenEveryVerdictIsTheSame) {
  EXPECT_FALSE(fleiss_kappa({{3, 0, 0}, {3, 0, 0}}));
  const auto a = agreement_of({{{"A", M}, {"B", M}}, {{"A", M}, {"B", M}}}, {100, 100});
  EXPECT_FALSE(a.kappa);
  EXPECT_DOUBLE_EQ(a.mean, 1.0);
  EXPECT_FALSE(a.flagged);
}

TEST(JudgeAgreement, PerfectAgreementAcrossCategoriesIsKappaOne) {
  const auto kappa = fleiss_kappa({{3, 0, 0}, {0, 3, 0}, {0, 0, 3}});
  ASSERT_TRUE(kappa);
  EXPECT_DOUBLE_EQ(*kappa, 1.0);
}

TEST(JudgeAgreement, OneSampleHasNothingToCompare) {
  const auto a = agreement_of({{{"A", M}}}, {100});
  EXPECT_FALSE(a.kappa);
  EXPECT_FALSE(a.flagged);
  EXPECT_TRUE(a.items.empty());
}

TEST(JudgeAgreement, AWideSpreadOfSampleScoresIsFlagged) {
  const std::vector<std::map<std::string, Verdict>> same = {{{"A", M}, {"B", N}}, {{"A", M}, {"B", N}}};
  EXPECT_FALSE(agreement_of(same, {50, 70}).flagged);  // a range of 20 is at the bar, not over it
  const auto wide = agreement_of(same, {50, 70.5});
  EXPECT_TRUE(wide.flagged);
  EXPECT_NE(wide.why.find("span 20.5 points"), std::string::npos) << wide.why;
}

}  // namespace
}  // namespace d2k::judge
