#include "reference/sample_test.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "reference/tensors.hpp"

namespace d2k {
namespace {

// Each of the test's three parts holds a third of the false-alarm rate (a union bound).
constexpr double kParts = 3.0;

// The excess over its mean above which a sum of independent Bernoulli trials of variance `variance`
// lies with probability at most `alpha`: Bernstein, P(S - ES >= t) <= exp(-t^2 / (2 (variance + t / 3))).
double bernstein_bound(double variance, double alpha) {
  const double l = std::log(1.0 / alpha);
  return l / 3.0 + std::sqrt(l * l / 9.0 + 2.0 * variance * l);
}

// sqrt(n) sup |F_n(u) - u| of values that should be uniform in [0, 1).
double ks_statistic(const at::Tensor& values) {
  const auto sorted = std::get<0>(values.to(at::kCPU, at::kDouble).flatten().sort());
  const int64_t n = sorted.numel();
  const double* u = sorted.data_ptr<double>();
  double d = 0;
  for (int64_t i = 0; i < n; ++i) {
    d = std::max(d, static_cast<double>(i + 1) / static_cast<double>(n) - u[i]);
    d = std::max(d, u[i] - static_cast<double>(i) / static_cast<double>(n));
  }
  return std::sqrt(static_cast<double>(n)) * d;
}

}  // namespace

Comparison compare_sample(const std::string& name, const at::Tensor& got_in, const at::Tensor& distribution) {
  if (at::isFloatingType(got_in.scalar_type()))
    fail("comparing '{}' as samples: needs an integer output, got {}", name, c10::toString(got_in.scalar_type()));
  if (distribution.dim() != got_in.dim() + 1 || !distribution.sizes().slice(0, got_in.dim()).equals(got_in.sizes()))
    fail("comparing '{}' as samples: draws of shape {} against a distribution of shape {} (one more dimension)", name,
         c10::str(got_in.sizes()), c10::str(distribution.sizes()));
  const int64_t n = distribution.size(-1);
  const auto got = widen(got_in).to(distribution.device()).flatten();
  const auto rows = distribution.reshape({-1, n});
  const auto in_range = (got >= 0) & (got < n);
  const auto q = rows.gather(1, got.clamp(0, n - 1).unsqueeze(1)).squeeze(1);
  const auto outside = (~in_range) | (q <= 0);

  Comparison result;
  result.name = name;
  result.metric = "sample";
  result.elements = got.numel();
  result.mismatches = outside.sum().item<int64_t>();
  result.passed = result.mismatches == 0;
  if (result.passed) return result;
  const int64_t i = outside.nonzero()[0][0].item<int64_t>();
  const int64_t value = got[i].item<int64_t>();
  const auto row = rows[i];
  const int64_t allowed = (row > 0).sum().item<int64_t>();
  result.worst_index = i;
  result.worst_got = static_cast<double>(value);
  result.worst_want = 0;
  result.detail = value < 0 || value >= n
                      ? fmt::format("element {} holds {}, not a value in [0, {})", i, value, n)
                      : fmt::format("element {} drew {}, which lies outside its allowed set (probability 0 after the "
                                    "truncation; {} values allowed, the least allowed of probability {:.3g})",
                                    i, value, allowed, at::where(row > 0, row, 2.0).min().item<double>());
  result.detail += fmt::format("; {} of {} elements outside their allowed sets", result.mismatches, result.elements);
  return result;
}

SampleTest::SampleTest(const at::Tensor& distribution) {
  const int64_t n = distribution.size(-1);
  distribution_ = distribution.reshape({-1, n}).to(at::kDouble);
  // Descending probability, ties in index order (a stable sort): any fixed order gives uniform U.
  const auto [sorted, order] = distribution_.sort(/*stable=*/true, /*dim=*/1, /*descending=*/true);
  before_ = at::empty_like(distribution_).scatter_(1, order, sorted.cumsum(1) - sorted);
  top_ = sorted.select(1, 0);
  top_mass_ = (distribution_ * (distribution_ == top_.unsqueeze(1))).sum(1);
  square_mass_ = distribution_.square().sum(1);
}

SampleTestResult SampleTest::operator()(const at::Tensor& draws_in, double false_alarm, uint64_t seed) const {
  const int64_t rows = distribution_.size(0), n = distribution_.size(1);
  if (draws_in.dim() != 2 || draws_in.size(1) != rows)
    fail("the distribution test: draws of shape {} for {} rows (calls x rows)", c10::str(draws_in.sizes()), rows);
  SampleTestResult r;
  r.calls = draws_in.size(0);
  r.draws = draws_in.numel();
  if (r.draws == 0) fail("the distribution test: no draws");
  const auto draws = widen(draws_in).to(distribution_.device()).t().contiguous();  // rows x calls
  const auto in_range = (draws >= 0) & (draws < n);
  const auto index = draws.clamp(0, n - 1);
  const auto q = distribution_.gather(1, index);
  r.outside = ((~in_range) | (q <= 0)).sum().item<int64_t>();
  if (r.outside > 0) {
    r.detail = fmt::format("{} of {} draws lie outside their allowed sets", r.outside, r.draws);
    return r;
  }
  const double alpha = false_alarm / kParts;

  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto v = at::rand(draws.sizes(), generator, at::TensorOptions().dtype(at::kDouble)).to(q.device());
  r.ks = ks_statistic(before_.gather(1, index) + v * q);
  r.ks_bound = std::sqrt(std::log(2.0 / alpha) / 2.0);

  const auto calls = static_cast<double>(r.calls);
  r.argmax = (q == top_.unsqueeze(1)).sum().item<int64_t>();
  r.argmax_expected = calls * top_mass_.sum().item<double>();
  r.argmax_bound = bernstein_bound(calls * (top_mass_ * (1 - top_mass_)).sum().item<double>(), alpha);

  const int64_t pairs = r.calls / 2;
  if (pairs > 0) {
    const auto first = draws.narrow(1, 0, 2 * pairs).reshape({rows, pairs, 2});
    r.repeats = (first.select(2, 0) == first.select(2, 1)).sum().item<int64_t>();
    r.repeats_expected = static_cast<double>(pairs) * square_mass_.sum().item<double>();
    r.repeats_bound =
        bernstein_bound(static_cast<double>(pairs) * (square_mass_ * (1 - square_mass_)).sum().item<double>(), alpha);
  }

  std::vector<std::string> why;
  if (r.argmax - r.argmax_expected > r.argmax_bound)
    why.push_back(fmt::format("the most probable value was drawn {} times where {:.1f} are expected, more than {:.1f} "
                              "above (a bias toward the argmax?)",
                              r.argmax, r.argmax_expected, r.argmax_bound));
  if (r.repeats - r.repeats_expected > r.repeats_bound)
    why.push_back(fmt::format("two consecutive calls drew the same value {} times in {} pairs of calls where {:.1f} "
                              "are expected, more than {:.1f} above (draws that ignore the seed?)",
                              r.repeats, pairs * rows, r.repeats_expected, r.repeats_bound));
  if (r.ks > r.ks_bound)
    why.push_back(fmt::format("the draws' probability integral transforms are not uniform: Kolmogorov-Smirnov "
                              "sqrt(n) D = {:.3f} above {:.3f}",
                              r.ks, r.ks_bound));
  r.passed = why.empty();
  if (r.passed) return r;
  r.detail = fmt::format("over {} seeded calls ({} draws) the draws do not follow the distribution ", r.calls, r.draws);
  r.detail += fmt::format("(each part of the test fails an exact sampler with probability at most {:.2g}): ", alpha);
  for (std::size_t i = 0; i < why.size(); ++i) r.detail += (i ? "; " : "") + why[i];
  return r;
}

}  // namespace d2k
