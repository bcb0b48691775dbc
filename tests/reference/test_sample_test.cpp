// The `sample` check kind: the support comparison of one call, and the distribution test of many seeded
// calls, run on simulated samplers. The test's stated false-alarm rate is measured on an exact sampler
// thousands of times; a sampler biased toward the argmax by a few percent, one that ignores its seed,
// the argmax itself and a sampler of the untruncated distribution must all fail it.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "core/task_loader.hpp"
#include "reference/inputs.hpp"
#include "reference/sample_test.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

const std::filesystem::path kTasks = std::filesystem::path(D2K_ROOT_DIR) / "tasks";

// The smoke workload's exact truncated distribution and the untruncated probabilities it came from.
struct Distributions {
  at::Tensor truncated, untruncated;
};
Distributions smoke_distribution(uint64_t seed) {
  const Task task = load_task(kTasks, std::string("sample/top_k_top_p"));
  const auto code = make_task_code("sample/top_k_top_p");
  const Workload& workload = *task.find_workload("smoke-B64-V515");
  const auto inputs = make_inputs(task, *code, workload, seed);
  return {code->distribution(inputs, scalars_for(task, workload)).at("token_ids"), inputs.at("probs").to(at::kDouble)};
}

// `calls` draws per row from `distribution` (rows x n), as calls x rows.
at::Tensor exact_draws(const at::Tensor& distribution, int64_t calls, at::Generator& gen) {
  return at::multinomial(distribution, calls, /*replacement=*/true, gen).t().contiguous();
}

at::Tensor argmax_of(const at::Tensor& distribution) { return distribution.argmax(1); }

// An exact sampler that, with probability `bias`, returns the row's argmax instead.
at::Tensor biased_draws(const at::Tensor& distribution, int64_t calls, double bias, at::Generator& gen) {
  const auto draws = exact_draws(distribution, calls, gen);
  const auto replace = at::empty(draws.sizes(), at::kDouble).uniform_(0, 1, gen) < bias;
  return at::where(replace, argmax_of(distribution).unsqueeze(0).expand_as(draws), draws);
}

TEST(SampleTest, TheMeasuredFalseAlarmRateOfAnExactSamplerIsBelowTheStatedOne) {
  const auto d = smoke_distribution(11).truncated;
  const SampleTest test(d);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  // 2000 evaluations of 64 calls of 64 rows at a stated rate of 5%, and 3000 at 1%: the union bound and
  // the DKW and Bernstein bounds are conservative, so the measured rates sit below (usually far below).
  for (double alpha : {0.05, 0.01}) {
    int failed = 0;
    const int trials = 2000;
    for (int t = 0; t < trials; ++t) failed += !test(exact_draws(d, 64, gen), alpha, 1000 + t).passed;
    const double rate = static_cast<double>(failed) / trials;
    // The measured rate's own noise: 3 standard deviations of a binomial at the stated rate.
    EXPECT_LE(rate, alpha + 3 * std::sqrt(alpha * (1 - alpha) / trials)) << "alpha " << alpha;
    std::cout << "stated false-alarm rate " << alpha << ": measured " << rate << " (" << failed << " of " << trials << ")\n";
  }
}

TEST(SampleTest, AnExactSamplerPassesEveryFullSizeEvaluationAtTheShippedRate) {
  for (uint64_t seed : {1, 2, 3, 4}) {
    const auto d = smoke_distribution(seed).truncated;
    const SampleTest test(d);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    for (int t = 0; t < 25; ++t) {
      const auto result = test(exact_draws(d, 1024, gen), kSampleFalseAlarm, t);
      EXPECT_TRUE(result.passed) << result.detail;
      EXPECT_EQ(result.draws, 1024 * 64);
    }
  }
}

TEST(SampleTest, ASamplerBiasedTowardTheArgmaxByAFewPercentFails) {
  for (uint64_t seed : {1, 2, 3, 4}) {
    const auto d = smoke_distribution(seed).truncated;
    const SampleTest test(d);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + 100);
    for (int t = 0; t < 5; ++t) {
      const auto result = test(biased_draws(d, 1024, 0.05, gen), kSampleFalseAlarm, t);
      EXPECT_FALSE(result.passed) << "seed " << seed << ": argmax " << result.argmax << " expected "
                                  << result.argmax_expected << " bound " << result.argmax_bound;
      EXPECT_GT(result.argmax, result.argmax_expected);
      EXPECT_NE(result.detail.find("a bias toward the argmax"), std::string::npos) << result.detail;
    }
  }
}

TEST(SampleTest, TheArgmaxFails) {
  const auto d = smoke_distribution(3).truncated;
  const auto result = SampleTest(d)(argmax_of(d).unsqueeze(0).repeat({1024, 1}), kSampleFalseAlarm, 0);
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.outside, 0);  // every argmax lies in the support: only the distribution shows it
}

TEST(SampleTest, ASamplerThatIgnoresItsSeedFails) {
  // One exact draw, returned by every call.
  const auto d = smoke_distribution(4).truncated;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
  const auto result = SampleTest(d)(exact_draws(d, 1, gen).repeat({1024, 1}), kSampleFalseAlarm, 0);
  EXPECT_FALSE(result.passed);
  EXPECT_NE(result.detail.find("ignore the seed"), std::string::npos) << result.detail;
}

TEST(SampleTest, ASamplerOfTheUntruncatedDistributionFailsOnTheSupport) {
  const auto both = smoke_distribution(5);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(2);
  const auto untruncated = both.untruncated / both.untruncated.sum(1, true);
  const auto draws = exact_draws(untruncated, 1024, gen);
  const auto result = SampleTest(both.truncated)(draws, kSampleFalseAlarm, 0);
  EXPECT_FALSE(result.passed);
  EXPECT_GT(result.outside, 0);
  // And a single call is caught on its own by the support comparison.
  const auto one = compare_sample("token_ids", draws[0], both.truncated);
  EXPECT_FALSE(one.passed);
  EXPECT_NE(one.detail.find("outside its allowed set"), std::string::npos) << one.detail;
}

TEST(SampleTest, TheSupportComparisonAcceptsEveryAllowedValueAndNamesAWrongOne) {
  const auto d = at::tensor({0.5, 0.5, 0.0, 0.0, 0.0, 1.0}, at::kDouble).view({2, 3});
  EXPECT_TRUE(compare_sample("t", at::tensor({0, 2}, at::kLong), d).passed);
  EXPECT_TRUE(compare_sample("t", at::tensor({1, 2}, at::kLong), d).passed);
  const auto zero = compare_sample("t", at::tensor({0, 1}, at::kLong), d);
  EXPECT_FALSE(zero.passed);
  EXPECT_EQ(zero.mismatches, 1);
  EXPECT_EQ(zero.worst_index, 1);
  const auto range = compare_sample("t", at::tensor({3, -1}, at::kLong), d);
  EXPECT_EQ(range.mismatches, 2);
  EXPECT_NE(range.detail.find("not a value in [0, 3)"), std::string::npos) << range.detail;
}

}  // namespace
}  // namespace d2k
