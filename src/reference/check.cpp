#include "reference/check.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/expr.hpp"
#include "reference/compare.hpp"
#include "reference/compare_segments.hpp"
#include "reference/sample_test.hpp"
#include "reference/tensors.hpp"

namespace d2k {
namespace {

std::string shape_string(const at::Tensor& t) { return c10::str(t.sizes()); }

// Elements the harness poisoned (0xFF bytes) that still hold the poison: NaN for floats, -1 for ints.
at::Tensor poisoned(const at::Tensor& got) {
  const auto wide = widen(got);
  return at::isFloatingType(wide.scalar_type()) ? at::isnan(wide) : wide.eq(-1);
}

// Whether the output's bytes read as another element type match the oracle: the classic mistake of
// writing float32 into a bfloat16 output (or the reverse).
std::optional<DType> misread_dtype(const at::Tensor& got, const at::Tensor& want, DType declared) {
  if (!got.is_contiguous()) return std::nullopt;
  const auto bytes = got.flatten().view(at::kByte);
  const bool floating = is_floating(declared);
  const std::vector<DType> candidates = floating ? std::vector<DType>{DType::f32, DType::bf16, DType::f16, DType::f64}
                                                 : std::vector<DType>{DType::i32, DType::i64, DType::i8};
  const auto want_flat = widen(want).flatten();
  for (DType candidate : candidates) {
    if (candidate == declared) continue;
    const auto n = bytes.numel() / static_cast<int64_t>(size_of(candidate));
    if (n < 1) continue;
    const auto as = bytes.narrow(0, 0, n * static_cast<int64_t>(size_of(candidate))).view(to_torch(candidate));
    const auto values = widen(as);
    const auto reference = want_flat.narrow(0, 0, std::min<int64_t>(n, want_flat.numel()));
    const auto head = values.narrow(0, 0, reference.numel());
    if (!at::isfinite(head).all().item<bool>()) continue;
    const double energy = reference.to(at::kDouble).square().sum().item<double>();
    const double err = (head.to(at::kDouble) - reference.to(at::kDouble)).square().sum().item<double>();
    if (floating ? (energy > 0 && err / energy < 1e-3) : err == 0) return candidate;
  }
  return std::nullopt;
}

}  // namespace

Verdict check(const Task& task, const TaskCode& code, const Scalars& scalars, const TensorMap& got,
              const TensorMap& want, const std::vector<GuardViolation>& violations) {
  Verdict verdict;

  // Writing outside every tensor's extent is rejected outright; past the end of an output it is most
  // likely a wider dtype or a larger shape, which the comparison below tells apart.
  std::string overflowed;
  for (const auto& v : violations) {
    const auto* out = task.find_output(v.tensor);
    if (!out || v.side != "after") {
      verdict.status = Status::rejected;
      verdict.message = fmt::format("wrote outside its tensors: {} guard bytes {} '{}' changed", v.bytes, v.side, v.tensor);
      return verdict;
    }
    overflowed = v.tensor;
  }

  // The task's comparable view of both sides, from the raw outputs: compare() widens a chunk at a time,
  // so no float64 copy of a 67 M-element output is made here (it cost seconds per check).
  const auto got_view = code.comparable(got, scalars);
  const auto want_view = code.comparable(want, scalars);
  bool all_passed = true;
  for (const auto& [name, want_tensor] : want_view) {
    const auto* tolerance = task.tolerance_for(name);
    if (!tolerance) fail("{}: no tolerance for compared tensor '{}' (task.toml [compare.{}] or an output)", task.name, name, name);
    auto it = got_view.find(name);
    if (it == got_view.end()) fail("{}: comparable() gave '{}' for the oracle but not for the solution", task.name, name);
    if (tolerance->metric == Tolerance::Metric::segments) {
      auto labels = want_view.find(tolerance->labels);
      if (labels == want_view.end()) fail("{}: '{}' is compared as segments labelled by '{}', which the oracle lacks", task.name, name, tolerance->labels);
      const auto axis_value = [&](const std::string& formula) { return static_cast<int64_t>(evaluate(formula, scalars.axes)); };
      verdict.comparisons.push_back(compare_segments(name, it->second, want_tensor, labels->second,
                                                     axis_value(tolerance->block), axis_value(tolerance->pad)));
    } else if (tolerance->metric == Tolerance::Metric::sample) {
      verdict.comparisons.push_back(compare_sample(name, it->second, want_tensor));
    } else {
      verdict.comparisons.push_back(compare(name, it->second, want_tensor, *tolerance));
    }
    all_passed = all_passed && verdict.comparisons.back().passed;
  }
  if (all_passed && overflowed.empty()) return verdict;

  // Explain the failure: dtype, then shape, then numerics.
  for (const auto& spec : task.outputs) {
    const auto& raw = got.at(spec.name);
    const bool compared_fine = std::any_of(verdict.comparisons.begin(), verdict.comparisons.end(),
                                           [&](const Comparison& c) { return c.name == spec.name && c.passed; });
    if (compared_fine && spec.name != overflowed) continue;
    if (auto dtype = misread_dtype(raw, want.at(spec.name), spec.dtype)) {
      verdict.status = Status::incorrect_dtype;
      verdict.message = fmt::format("output '{}' holds {} values; the task declares {}", spec.name,
                                    name_of(*dtype), name_of(spec.dtype));
      return verdict;
    }
  }
  if (!overflowed.empty()) {
    verdict.status = Status::incorrect_shape;
    verdict.message = fmt::format("wrote past the end of output '{}' (shape {}): a larger shape or a wider dtype",
                                  overflowed, shape_string(got.at(overflowed)));
    return verdict;
  }
  for (const auto& spec : task.outputs) {
    if (spec.inplace) continue;
    const auto unwritten = poisoned(got.at(spec.name)).flatten();
    const auto count = unwritten.sum().item<int64_t>();
    if (count == 0) continue;
    const auto n = unwritten.numel();
    // All the unwritten elements at the end: the solution produced a smaller shape.
    if (count < n && unwritten.narrow(0, n - count, count).all().item<bool>()) {
      verdict.status = Status::incorrect_shape;
      verdict.message = fmt::format("output '{}' (shape {}): only the first {} of {} elements were written",
                                    spec.name, shape_string(got.at(spec.name)), n - count, n);
      return verdict;
    }
  }
  verdict.status = Status::incorrect_numerics;
  for (const auto& c : verdict.comparisons) {
    if (c.passed) continue;
    const auto* tolerance = task.tolerance_for(c.name);
    if (!c.detail.empty()) {
      verdict.message = fmt::format("'{}': {}", c.name, c.detail);
    } else if (c.non_finite) {
      verdict.message = fmt::format("'{}': {} of {} elements are NaN or Inf", c.name, c.non_finite, c.elements);
    } else if (c.mismatches == 0 && tolerance && c.nmse <= tolerance->nmse && c.misrounded && tolerance->misrounded) {
      // Close in value everywhere, but not the value the specification's one rounding gives: another
      // rounding mode (truncation), or a second rounding the specification does not have.
      verdict.message = fmt::format("'{}': {:.2f}% of its elements are not the exact result rounded to nearest even (at most "
                                    "{:.2f}% may differ): another rounding than the specification's",
                                    c.name, 100.0 * *c.misrounded, 100.0 * *tolerance->misrounded);
    } else if (c.mismatches == 0 && tolerance) {
      // Every element within its bound, but the error as a whole is too large: a systematic loss.
      verdict.message = fmt::format("'{}': nmse {:.3g} is above the bound {:.3g}, with every element within tolerance "
                                    "(worst at {}: got {:.6g}, want {:.6g})",
                                    c.name, c.nmse, tolerance->nmse, c.worst_index, c.worst_got, c.worst_want);
    } else if (c.metric == "exact") {
      verdict.message = fmt::format("'{}': {} of {} elements differ from the exact answer (the first at {}: got {:.6g}, want {:.6g})",
                                    c.name, c.mismatches, c.elements, c.worst_index, c.worst_got, c.worst_want);
    } else {
      verdict.message = fmt::format("'{}': {} of {} elements outside tolerance (worst at {}: got {:.6g}, want {:.6g}); nmse {:.3g}",
                                    c.name, c.mismatches, c.elements, c.worst_index, c.worst_got, c.worst_want, c.nmse);
    }
    break;
  }
  return verdict;
}

}  // namespace d2k
