// The score arithmetic and the dependency rule.
#include <gtest/gtest.h>

#include "judge/score.hpp"
#include "judge_fixture.hpp"

namespace d2k::judge {
namespace {

using namespace testing;
constexpr auto M = Verdict::met, P = Verdict::partly_met, N = Verdict::not_met;

std::map<std::string, Verdict> verdicts(std::vector<Verdict> v) {
  const auto ids = tiny_ids();
  std::map<std::string, Verdict> out;
  for (std::size_t i = 0; i < ids.size(); ++i) out[ids[i]] = v[i];
  return out;
}

TEST(JudgeScore, CreditsAreMetOnePartlyHalfNotZero) {
  EXPECT_EQ(credit_of(M), 1.0);
  EXPECT_EQ(credit_of(P), 0.5);
  EXPECT_EQ(credit_of(N), 0.0);
}

TEST(JudgeScore, AllMetIsAHundredAndNoneMetIsZero) {
  const auto task = tiny_task();
  EXPECT_DOUBLE_EQ(score_sample(task.guidance, verdicts({M, M, M, M, M, M})).score, 100.0);
  EXPECT_DOUBLE_EQ(score_sample(task.guidance, verdicts({N, N, N, N, N, N})).score, 0.0);
}

TEST(JudgeScore, TheMeanOfCreditsOverallAndPerLevel) {
  const auto task = tiny_task();
  // L1.1 M, L1.2 P, L2.1 P, L2.2 M, L3.1 M, L3.2 N: no dependency falls below partly met.
  const auto s = score_sample(task.guidance, verdicts({M, P, P, M, M, N}));
  EXPECT_DOUBLE_EQ(s.score, 100.0 * (1 + 0.5 + 0.5 + 1 + 1 + 0) / 6);
  EXPECT_DOUBLE_EQ(s.levels.at(1), 75.0);
  EXPECT_DOUBLE_EQ(s.levels.at(2), 75.0);
  EXPECT_DOUBLE_EQ(s.levels.at(3), 50.0);
}

TEST(JudgeScore, AnItemWhoseDependencyIsNotMetGetsNothingDownTheChain) {
  const auto task = tiny_task();
  // L2.1 not met: L2.2 (depends on it) and L3.1 (on L2.2) get 0 though met; L3.2 has no dependency.
  const auto s = score_sample(task.guidance, verdicts({M, M, N, M, M, M}));
  EXPECT_EQ(s.credit.at("L2.2"), 0.0);
  EXPECT_EQ(s.credit.at("L3.1"), 0.0);
  EXPECT_EQ(s.credit.at("L3.2"), 1.0);
  EXPECT_DOUBLE_EQ(s.score, 100.0 * 3 / 6);
  EXPECT_DOUBLE_EQ(s.levels.at(2), 0.0);
  EXPECT_DOUBLE_EQ(s.levels.at(3), 50.0);
}

TEST(JudgeScore, APartlyMetDependencyIsEnough) {
  const auto task = tiny_task();
  const auto s = score_sample(task.guidance, verdicts({P, M, M, M, M, M}));
  EXPECT_EQ(s.credit.at("L1.1"), 0.5);
  EXPECT_EQ(s.credit.at("L1.2"), 1.0);
  EXPECT_EQ(s.credit.at("L2.1"), 1.0);
  EXPECT_DOUBLE_EQ(s.score, 100.0 * 5.5 / 6);
}

TEST(JudgeScore, ARootNotMetZeroesEverythingThatDependsOnIt) {
  const auto task = tiny_task();
  const auto s = score_sample(task.guidance, verdicts({N, M, M, M, M, M}));
  for (const char* id : {"L1.1", "L1.2", "L2.1", "L2.2", "L3.1"}) EXPECT_EQ(s.credit.at(id), 0.0) << id;
  EXPECT_DOUBLE_EQ(s.score, 100.0 / 6);
}

TEST(JudgeScore, AMissingVerdictCountsNotMet) {
  const auto task = tiny_task();
  auto v = verdicts({M, M, M, M, M, M});
  v.erase("L3.2");
  EXPECT_DOUBLE_EQ(score_sample(task.guidance, v).score, 100.0 * 5 / 6);
}

TEST(JudgeScore, TheScoreIsTheMeanOfTheSamples) {
  const auto task = tiny_task();
  const auto a = score_sample(task.guidance, verdicts({M, M, M, M, M, M}));  // 100
  const auto b = score_sample(task.guidance, verdicts({M, M, N, M, M, M}));  // 50
  const auto c = score_sample(task.guidance, verdicts({M, P, M, M, M, N}));  // 75
  const auto s = combine({a, b, c});
  EXPECT_DOUBLE_EQ(s.score, 75.0);
  EXPECT_EQ(s.samples, (std::vector<double>{100.0, 50.0, 75.0}));
  EXPECT_DOUBLE_EQ(s.credit.at("L2.2"), 2.0 / 3);
  EXPECT_DOUBLE_EQ(s.credit.at("L1.2"), 2.5 / 3);
  EXPECT_DOUBLE_EQ(s.levels.at(1), (100.0 + 100.0 + 75.0) / 3);
  EXPECT_EQ(combine({}).score, 0.0);
}

}  // namespace
}  // namespace d2k::judge
