#include "reference/inputs.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "core/error.hpp"
#include "core/splitmix.hpp"
#include "reference/tensors.hpp"

namespace d2k {
namespace {

// Values of one distribution, logical shape. Drawn in float64 only where the input's dtype needs more than
// float32 holds; float32 draws take half the time and memory, and the T=16384 workloads draw 67 M values
// per input (most of the harness's own time went here).
at::Tensor draw(const InputInit& init, at::IntArrayRef shape, at::Generator& gen, at::ScalarType type) {
  const auto options = at::TensorOptions().dtype(type);
  if (init.dist == "normal") return at::normal(init.mean, init.std, shape, gen, options);
  if (init.dist == "uniform") return at::empty(shape, options).uniform_(init.low, init.high, gen);
  if (init.dist == "student_t") {
    // t = z / sqrt(chi2(df) / df), chi2(df) = 2 * Gamma(df / 2): heavy tails that expose lost precision.
    auto z = at::normal(0.0, 1.0, shape, gen, options);
    at::Tensor chi2;
    if (init.df == std::floor(init.df) && init.df >= 1 && init.df <= 8) {
      // For a whole df, chi2(df) is a sum of df squared normals: the same distribution as the gamma
      // draw below, several times faster (a gamma draw per element made the heavy-tailed workloads'
      // inputs the slowest step of their evaluation).
      chi2 = at::normal(0.0, 1.0, shape, gen, options).square();
      for (int k = 1; k < static_cast<int>(init.df); ++k) chi2 += at::normal(0.0, 1.0, shape, gen, options).square();
    } else {
      chi2 = 2.0 * at::_standard_gamma(at::full(shape, init.df / 2.0, options), gen);
    }
    return init.mean + init.std * z / at::sqrt(chi2 / init.df);
  }
  if (init.dist == "ties") {
    // Values on a coarse grid, so that equal values recur within a row.
    auto z = at::normal(init.mean, init.std, shape, gen, options);
    auto values = at::round(z / init.quantum) * init.quantum;
    if (init.nudge == 0) return values;
    // Half of the nudged values one ulp up, half one down; zero stays (its neighbours are subnormal,
    // nearer than a float64 oracle keeps apart after a subtraction).
    const auto u = at::empty(shape, options).uniform_(0.0, 1.0, gen);
    const auto inf = at::full({}, std::numeric_limits<double>::infinity(), options);
    const auto moved = values != 0;
    values = at::where(moved & (u < init.nudge / 2), at::nextafter(values, inf), values);
    return at::where(moved & (u >= init.nudge / 2) & (u < init.nudge), at::nextafter(values, -inf), values);
  }
  if (init.dist == "randint")
    return at::randint(static_cast<int64_t>(init.low), static_cast<int64_t>(init.high), shape, gen, options);
  if (init.dist == "sparse_groups") {
    // Whole groups only: the loader holds `group` to a power of two that divides a drawing chunk, so a
    // chunk's groups are the tensor's; a tail shorter than a group stays normal.
    auto values = at::normal(init.mean, init.std, shape, gen, options);
    const auto group = static_cast<int64_t>(init.group), groups = values.numel() / group;
    if (groups == 0) return values;
    const auto u = at::empty({groups}, options).uniform_(0.0, 1.0, gen);
    const auto factor = at::where(u < init.zero_share, 0.0,
                                  at::where(u < init.zero_share + init.tiny_share, init.tiny, 1.0)).to(type);
    values.narrow(0, 0, groups * group).view({groups, group}).mul_(factor.unsqueeze(1));
    return values;
  }
  fail("unknown distribution '{}'", init.dist);
}

// A well-mixed 64-bit seed from (seed, input, chunk): splitmix64 over the three.
uint64_t mix(uint64_t seed, uint64_t input, uint64_t chunk) {
  uint64_t x = seed;
  for (uint64_t part : {input, chunk}) {
    x = splitmix_finalize(x + kSplitMixIncrement + part);
  }
  return x;
}

}  // namespace

// The values of input `index`, drawn in fixed chunks of the flattened tensor, each chunk from its own
// generator: the chunks are drawn in parallel, and the values do not depend on the number of threads.
at::Tensor draw_input(const InputInit& init, at::IntArrayRef shape, uint64_t seed, uint64_t index, at::ScalarType type) {
  constexpr int64_t kChunk = 1 << 20;
  const int64_t n = c10::multiply_integers(shape);
  auto values = at::empty({n}, at::TensorOptions().dtype(type));
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(mix(seed, index, static_cast<uint64_t>(c)));
      const int64_t start = c * kChunk, length = std::min(kChunk, n - start);
      values.narrow(0, start, length).copy_(draw(init, {length}, gen, type));
    }
  });
  return values.view(shape);
}

namespace {

// The task's own draw (TaskCode::make_inputs), laid out as the task says; nothing when it has none. With
// `prepared` (a second draw), the inputs it holds are taken from it, and the task may skip drawing them
// (TaskCode::make_unprepared_inputs).
std::optional<TensorMap> custom_inputs(const Task& task, const TaskCode& code, const Workload& workload, uint64_t seed,
                                       const TensorMap* prepared = nullptr) {
  const auto draw = [&](auto make) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    return (code.*make)(task, workload, gen);
  };
  auto custom = prepared ? draw(&TaskCode::make_unprepared_inputs) : std::nullopt;
  const char* made_by = custom ? "make_unprepared_inputs" : "make_inputs";
  if (!custom) custom = draw(&TaskCode::make_inputs);
  if (!custom) return std::nullopt;
  TensorMap laid;
  for (const auto& spec : task.inputs) {
    if (prepared && spec.prepare) {
      laid[spec.name] = prepared->at(spec.name);
      continue;
    }
    auto it = custom->find(spec.name);
    if (it == custom->end()) fail("{}: {} did not produce input '{}'", task.name, made_by, spec.name);
    laid[spec.name] = lay_out(it->second, geometry_of(spec, workload), spec.dtype);
  }
  return laid;
}

}  // namespace

TensorMap make_inputs(const Task& task, const TaskCode& code, const Workload& workload, uint64_t seed) {
  if (auto custom = custom_inputs(task, code, workload, seed)) return std::move(*custom);
  TensorMap inputs;
  for (std::size_t i = 0; i < task.inputs.size(); ++i) {
    const auto& spec = task.inputs[i];
    const auto geometry = geometry_of(spec, workload);
    // Generators per input (and chunk), so adding an input does not change the others' values.
    // Integers are drawn as float64, exact up to 2^53; floating inputs of 32 bits or fewer as float32.
    const bool narrow = is_floating(spec.dtype) && spec.dtype != DType::f64;
    const auto wide = narrow ? at::kFloat : at::kDouble;
    auto values = draw_input(init_of(spec, workload), geometry.shape, seed, i, wide);
    inputs[spec.name] = lay_out(values, geometry, spec.dtype);
  }
  return inputs;
}

TensorMap make_second_inputs(const Task& task, const TaskCode& code, const Workload& workload, const TensorMap& first,
                             uint64_t seed) {
  // A task with its own generator (structured inputs such as routing ids) gets a whole fresh draw but
  // its prepared inputs: changing single elements could break its structure.
  if (auto fresh = custom_inputs(task, code, workload, seed, &first)) return std::move(*fresh);
  TensorMap mixed;
  for (std::size_t i = 0; i < task.inputs.size(); ++i) {
    const auto& spec = task.inputs[i];
    // What d2k_prepare saw (weights) stays: the solution's prepared state is of the first draw's.
    if (spec.prepare) {
      mixed[spec.name] = first.at(spec.name);
      continue;
    }
    const auto geometry = geometry_of(spec, workload);
    // About one element in kSecondDrawChange (at least one, so that a tiny input differs too) gets a
    // value drawn afresh from the input's distribution; where it happens to equal the old one the
    // element is still "changed", harmlessly. Only those few values are drawn: the rest is a copy.
    auto logical = first.at(spec.name).contiguous().view(-1).clone();
    const int64_t count = std::max<int64_t>(1, logical.numel() / kSecondDrawChange);
    if (logical.numel() > 0) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(mix(seed, i, 0x5eC0D));
      const auto where = at::randint(logical.numel(), {count}, gen, at::TensorOptions().dtype(at::kLong));
      const auto wide = is_floating(spec.dtype) && spec.dtype != DType::f64 ? at::kFloat : at::kDouble;
      logical.index_put_({where}, draw(init_of(spec, workload), {count}, gen, wide).to(logical.scalar_type()));
    }
    mixed[spec.name] = lay_out(logical.view(geometry.shape), geometry, spec.dtype);
  }
  return mixed;
}

Scalars scalars_for(const Task& task, const Workload& workload) {
  Scalars scalars;
  for (const auto& [spec, value] : scalars_of(task, workload)) scalars.values[spec->name] = value;
  scalars.axes = workload.axes;
  return scalars;
}

}  // namespace d2k
