#include "reference/compare.hpp"

#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "reference/tensors.hpp"

namespace d2k {
namespace {

void record_worst(Comparison& result, const at::Tensor& score, const at::Tensor& got, const at::Tensor& want) {
  if (score.numel() == 0) return;
  const auto index = score.argmax().item<int64_t>();
  result.worst_index = index;
  result.worst_got = got.flatten()[index].item<double>();
  result.worst_want = want.flatten()[index].item<double>();
}

}  // namespace

Comparison compare(const std::string& name, const at::Tensor& got_in, const at::Tensor& want_in,
                   const Tolerance& tolerance) {
  if (got_in.sizes() != want_in.sizes())
    fail("comparing '{}': shapes {} and {} differ", name, c10::str(got_in.sizes()), c10::str(want_in.sizes()));
  Comparison result;
  result.name = name;
  result.elements = got_in.numel();
  const auto got = widen(got_in).to(at::kDouble);
  const auto want = widen(want_in).to(at::kDouble);

  if (tolerance.metric == Tolerance::Metric::exact) {
    result.metric = "exact";
    const auto unequal = got.ne(want);
    result.mismatches = unequal.sum().item<int64_t>();
    result.non_finite = (~at::isfinite(got)).sum().item<int64_t>();
    const auto diff = (got - want).abs().nan_to_num(std::numeric_limits<double>::infinity());
    result.max_abs_error = diff.numel() ? diff.max().item<double>() : 0.0;
    record_worst(result, unequal.to(at::kDouble), got, want);
    result.passed = result.mismatches == 0 && result.non_finite == 0;
    return result;
  }

  result.metric = "numeric";
  const auto finite = at::isfinite(got);
  result.non_finite = (~finite).sum().item<int64_t>();
  const auto inf = std::numeric_limits<double>::infinity();
  // A non-finite value counts as an infinite error everywhere below.
  const auto diff = at::where(finite, (got - want).abs(), at::full({}, inf, got.options()));
  const auto want_abs = want.abs();
  const double sum_want2 = want.square().sum().item<double>();
  const double rms = result.elements ? std::sqrt(sum_want2 / static_cast<double>(result.elements)) : 0.0;
  const auto bound = tolerance.atol * rms + tolerance.rtol * want_abs;
  // excess = diff / bound, with 0/0 = 0 (exact match where nothing is allowed) and x/0 = inf.
  const auto excess = at::where(diff.eq(0), at::zeros_like(diff), diff / bound);
  result.mismatches = excess.gt(1.0).sum().item<int64_t>();
  if (result.elements) {
    result.max_abs_error = diff.max().item<double>();
    result.worst_excess = excess.max().item<double>();
    const auto rel = at::where(want_abs.gt(0), diff / want_abs, at::zeros_like(diff));
    result.max_rel_error = rel.max().item<double>();
    record_worst(result, excess, got, want);
  }
  const double sum_diff2 = at::where(finite, (got - want).square(), at::zeros_like(got)).sum().item<double>();
  result.nmse = sum_want2 > 0 ? sum_diff2 / sum_want2 : (sum_diff2 > 0 ? inf : 0.0);
  if (result.non_finite) result.nmse = inf;
  result.passed = result.non_finite == 0 && result.mismatches == 0 && result.nmse <= tolerance.nmse;
  return result;
}

}  // namespace d2k
