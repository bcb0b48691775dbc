#include "eval/checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "core/keyed_digest.hpp"
#include "core/metrics.hpp"
#include "reference/check.hpp"
#include "reference/sample_test.hpp"
#include "reference/tensors.hpp"
#include "timing/rotation.hpp"
#include "timing/stats.hpp"

namespace d2k {
namespace {

using Check = std::optional<Finding> (*)(const WorkloadRun&);

Finding finding(Status status, std::string message) { return Finding{status, std::move(message), {}}; }

const WorkerReport& report_of(const WorkloadRun& run) { return run.outcome.report; }

std::string stage_reached(const WorkerReport& report) {
  return report.reached ? std::string(name_of(*report.reached)) : std::string("start");
}

Finding from_failure(const WorkerFailure& failure) {
  return finding(failure.status == WorkerStatus::rejected ? Status::rejected : Status::runtime_error,
                 fmt::format("{}: {}", name_of(failure.stage), failure.message));
}

// The names of the read-only inputs, in request order: what input digests cover.
std::vector<std::string> read_only_inputs(const WorkerRequest& request) {
  std::vector<std::string> names;
  for (const auto& input : request.inputs)
    if (!inplace_output(request, input)) names.push_back(input.name);
  return names;
}

std::optional<Finding> evidence_is_the_workers(const WorkloadRun& run) {
  if (!run.outcome.forged) return std::nullopt;
  return finding(Status::rejected, fmt::format("the evidence stream carried a frame the worker did not write ({}): the "
                                               "solution tampered with the harness's evidence",
                                               *run.outcome.forged));
}

std::optional<Finding> ended_in_time(const WorkloadRun& run) {
  if (run.outcome.process.end != ProcessResult::End::timed_out) return std::nullopt;
  return finding(Status::timeout,
                 fmt::format("the worker {} (stage: {})", run.outcome.process.describe(), stage_reached(report_of(run))));
}

// A failure before the checked call's outputs came back decides the trace; a later one waits until
// the outputs are checked (a wrong answer says more than a crash while timing).
std::optional<Finding> checked_outputs_came_back(const WorkloadRun& run) {
  const WorkerReport& report = report_of(run);
  if (report.checked) return std::nullopt;
  if (report.failure) return from_failure(*report.failure);
  return finding(Status::runtime_error,
                 fmt::format("the worker {} (stage: {})", run.outcome.process.describe(), stage_reached(report)));
}

std::optional<Finding> compare_digests(const WorkloadRun& run, std::string_view what, const std::vector<uint64_t>& want,
                                       std::size_t copies) {
  const auto names = read_only_inputs(run.request);
  const auto it = report_of(run).digests.find(what);
  if (it == report_of(run).digests.end()) return std::nullopt;  // not sent: the worker stopped before
  const auto& got = it->second;
  if (got.size() != names.size() * copies)
    return finding(Status::rejected, fmt::format("{} digests of {} for {} inputs", got.size(), what, names.size()));
  for (std::size_t k = 0; k < got.size(); ++k) {
    if (got[k] == want[k % names.size()]) continue;
    const std::string where = copies > 1 ? fmt::format(" in the copy {} of the timed calls", k / names.size()) : "";
    return finding(Status::rejected, fmt::format("modified its input '{}'{} (its bytes after the call are not the bytes "
                                                 "sent; {}); inputs are read-only",
                                                 names[k % names.size()], where, what));
  }
  return std::nullopt;
}

std::optional<Finding> inputs_unchanged(const WorkloadRun& run) {
  if (auto found = compare_digests(run, kDigestInputsSecond, run.second_digests, 1)) return found;
  return compare_digests(run, kDigestInputsChecked, run.first_digests, 1);
}

std::optional<Finding> checked_call_matches_the_oracle(const WorkloadRun& run) {
  const auto got = outputs_of(run.task, run.workload, *report_of(run).checked, run.device);
  auto verdict = check(run.task, run.code, run.scalars, got, run.want, report_of(run).guard_violations);
  if (verdict.status == Status::passed) return Finding{Status::passed, "", std::move(verdict.comparisons)};
  Finding found{verdict.status, verdict.message, std::move(verdict.comparisons)};
  // Wrong for its own inputs but right for the draw the same buffers held before: the solution answers
  // by address (a cache), not by content.
  if (run.request.second_draw && check(run.task, run.code, run.scalars, got, run.second_want, {}).status == Status::passed) {
    found.status = Status::rejected;
    found.message = "returned the outputs of the inputs the same buffers held in the previous call, which differed in "
                    "a few elements: its outputs follow the addresses (or a sample) of the inputs, not their contents "
                    "(a cache?)";
  }
  return found;
}

std::optional<Finding> second_draw_matches_its_oracle(const WorkloadRun& run) {
  if (!run.request.second_draw) return std::nullopt;
  if (!report_of(run).second) return finding(Status::runtime_error, "the worker sent no outputs of the second draw");
  const auto got = outputs_of(run.task, run.workload, *report_of(run).second, run.device);
  auto verdict = check(run.task, run.code, run.scalars, got, run.second_want, report_of(run).guard_violations);
  if (verdict.status == Status::passed) return std::nullopt;
  return finding(verdict.status, fmt::format("on a second draw of the inputs (a few elements changed): {}", verdict.message));
}

std::optional<Finding> repeat_is_identical(const WorkloadRun& run) {
  if (!run.request.second_draw || !run.request.deterministic) return std::nullopt;
  const auto it = report_of(run).digests.find(kDigestRepeat);
  if (it == report_of(run).digests.end()) return std::nullopt;  // the repeat failed: its failure decides
  const auto& second = *report_of(run).second;
  if (it->second.size() != second.size())
    return finding(Status::rejected, fmt::format("{} digests of the repeat's {} outputs", it->second.size(), second.size()));
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  for (std::size_t o = 0; o < second.size(); ++o) {
    if (keyed_digest(run.request.digest_key, second[o].data(), second[o].size(), threads) == it->second[o]) continue;
    return finding(Status::rejected,
                   fmt::format("output '{}' changed between two runs on the same inputs; the task is deterministic, so "
                               "the outputs must not depend on anything but the inputs (uninitialized memory? a "
                               "result kept from an earlier call?)",
                               run.request.outputs[o].name));
  }
  return std::nullopt;
}

std::optional<Finding> no_later_failure(const WorkloadRun& run) {
  const WorkerReport& report = report_of(run);
  if (report.failure) return from_failure(*report.failure);
  if (!run.outcome.process.ok() || !report.ended)
    return finding(Status::runtime_error,
                   fmt::format("the worker {} (stage: {})", run.outcome.process.describe(), stage_reached(report)));
  return std::nullopt;
}

// A task with a sampled output: the seeded calls (the checked call's inputs, a fresh seed each) drew values
// in their allowed sets that, all together, follow the oracle's distribution (reference/sample_test.hpp).
std::optional<Finding> seeded_draws_follow_the_distribution(const WorkloadRun& run) {
  const TensorSpec* sampled = run.task.sampled_output();
  if (sampled == nullptr || run.request.seeded_calls <= 0) return std::nullopt;
  const auto& seeded = report_of(run).seeded;
  if (static_cast<int>(seeded.size()) != run.request.seeded_calls)
    return finding(Status::runtime_error, fmt::format("the worker sent the outputs of {} of the {} seeded calls",
                                                      seeded.size(), run.request.seeded_calls));
  std::vector<at::Tensor> draws;
  for (const auto& call : seeded) draws.push_back(outputs_of(run.task, run.workload, call.outputs, run.device).at(sampled->name).flatten());
  const auto& distribution = run.want.at(sampled->name);
  const SampleTest test(distribution);
  const auto result = test(at::stack(draws), kSampleFalseAlarm, run.request.seed_key);
  if (result.passed) return std::nullopt;
  return finding(Status::incorrect_numerics, fmt::format("'{}': {}", sampled->name, result.detail));
}

// Every timed call ran on freshly patched inputs; those whose outputs came back (chosen after each call,
// and the last) must match the oracle of their own inputs: a replay of an earlier call cannot.
std::optional<Finding> timed_calls_match_their_oracles(const WorkloadRun& run) {
  if (!run.timed) return std::nullopt;
  const WorkerReport& report = report_of(run);
  if (report.timed.empty()) return finding(Status::runtime_error, "the worker sent no timed call's outputs");
  for (const auto& timed : report.timed) {
    const auto got = outputs_of(run.task, run.workload, timed.outputs, run.device);
    const auto verdict = check(run.task, run.code, run.scalars, got, run.oracle_of_call(timed.call), report.guard_violations);
    if (verdict.status == Status::passed) continue;
    return finding(Status::rejected,
                   fmt::format("timed call {} (inputs patched for it, unknown to the solution in advance): {}; every "
                               "timed call must compute its own outputs",
                               timed.call, verdict.message));
  }
  return std::nullopt;
}

std::optional<Finding> timed_copies_unchanged(const WorkloadRun& run) {
  if (!run.timed || !report_of(run).timing) return std::nullopt;
  return compare_digests(run, kDigestInputsCopies, run.first_digests,
                         static_cast<std::size_t>(std::max(1, report_of(run).timing->rotation_sets)));
}

std::optional<Finding> timing_came_back(const WorkloadRun& run) {
  if (!run.timed) return std::nullopt;
  if (!report_of(run).timing || report_of(run).timing->samples_ms.empty())
    return finding(Status::runtime_error, "the worker returned no timing samples");
  return std::nullopt;
}

std::optional<Finding> outside_clock_agrees(const WorkloadRun& run) {
  if (!run.timed) return std::nullopt;
  if (auto why = clock_disagrees(report_of(run), run.device)) {
    auto found = finding(Status::rejected, *why);
    found.host_may_explain = true;
    return found;
  }
  return std::nullopt;
}

// cuda: the second clock's records of the verification calls (CUPTI) against the event timer's.
std::optional<Finding> second_clock_agrees(const WorkloadRun& run) {
  if (!run.timed) return std::nullopt;
  const TimingReport& timing = *report_of(run).timing;
  if (!timing.second_clock || !timing.second_clock->available) return std::nullopt;
  // The calls before the timed loop are the first of the timing stage (patch indices 0..): the solution
  // can count its way to them, so their outputs must be among those checked (timed_calls_match_their_oracles).
  const auto& timed = report_of(run).timed;
  for (int64_t call = 0; call < timing.second_clock->before_calls; ++call)
    if (std::none_of(timed.begin(), timed.end(), [&](const auto& kept) { return kept.call == call; }))
      return finding(Status::rejected, fmt::format("the outputs of verification call {} (before the timed loop) did not "
                                                   "come back: the calls the second clock measures there are checked",
                                                   call));
  if (auto why = second_clock_disagrees(*timing.second_clock, summarize(timing.samples_ms).median_ms))
    return finding(Status::rejected, *why);
  return std::nullopt;
}

std::optional<Finding> not_faster_than_light(const WorkloadRun& run) {
  if (!run.timed) return std::nullopt;
  const TimingReport& timing = *report_of(run).timing;
  const auto light = faster_than_light(summarize(timing.samples_ms).median_ms, flops_of(run.task, run.workload),
                                       min_bytes_of(run.task, run.workload), run.ceilings, run.task.flops_dtype,
                                       run.device, timing.rotation_sets, timing.rotation_bytes);
  if (light.rejected) return finding(Status::rejected, *light.rejected);
  return std::nullopt;
}

constexpr Check kChecks[] = {
    evidence_is_the_workers,         // nothing in the report counts otherwise
    ended_in_time,
    checked_outputs_came_back,
    inputs_unchanged,
    checked_call_matches_the_oracle,
    second_draw_matches_its_oracle,
    repeat_is_identical,
    no_later_failure,
    seeded_draws_follow_the_distribution,
    timed_calls_match_their_oracles,
    timed_copies_unchanged,
    timing_came_back,
    outside_clock_agrees,
    second_clock_agrees,
    not_faster_than_light,
};

}  // namespace

std::optional<Finding> check_run(const WorkloadRun& run, std::vector<Comparison>& comparisons) {
  for (Check check : kChecks) {
    auto found = check(run);
    if (!found) continue;
    if (check == checked_call_matches_the_oracle) comparisons = found->comparisons;
    if (found->status == Status::passed) continue;
    return found;
  }
  return std::nullopt;
}

TensorMap outputs_of(const Task& task, const Workload& workload, const std::vector<std::string_view>& bytes,
                     Device device) {
  TensorMap got;
  for (std::size_t i = 0; i < task.outputs.size(); ++i) {
    const auto& out = task.outputs[i];
    got[out.name] = tensor_from_bytes(bytes[i], out.dtype, geometry_of(out, workload), device);
  }
  return got;
}

// The slack of the outside clock: what the harness's per-call work may vary between the loop with
// nothing called and the timed loop (restores, the synchronization, the checks after each call).
namespace {
// The share of the outside clock's time per call the samples must explain: a forged clock gains at most
// 1/that. The cpu device is a test seam on shared, loaded machines (CI), where the harness's own per-call
// work varies more between the two loops: a lower bar, still well above a clock at half speed.
constexpr double kClockExplainedFractionCuda = 0.75;
constexpr double kClockExplainedFractionCpu = 0.6;
constexpr double kClockSlackFraction = 0.25;  // of the harness's own cost per call
constexpr double kClockSlackCudaSeconds = 50e-6;
constexpr double kClockSlackCpuSeconds = 1e-3;
// The second clock: the device's busy time may exceed the events' by this factor and slack (event
// timestamps are taken on the stream, records per kernel; launch gaps make the events the longer one).
constexpr double kSecondClockFactor = 1.1;
constexpr double kSecondClockSlackMs = 0.005;

double quantile_of(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return quantile(values, q);
}

// Per timed call, what the outside clock says the calls themselves took: the interval's cost per call
// less the harness's own per call (measured the same way with nothing called, before the solution was
// loaded and again after its calls: the larger, the cost under the load the calls may have had).
std::optional<double> implied_per_call(std::optional<double> noop, std::optional<double> noop_after,
                                       int64_t noop_calls, std::optional<double> timed, int64_t timed_calls,
                                       double& harness) {
  if (!noop || !timed || noop_calls <= 0 || timed_calls <= 0) return std::nullopt;
  harness = std::max(*noop, noop_after.value_or(0.0)) / static_cast<double>(noop_calls);
  return *timed / static_cast<double>(timed_calls) - harness;
}

}  // namespace

std::optional<OutsideClock> outside_clock_of(const WorkerReport& report) {
  if (!report.timing || report.timing->samples_ms.empty()) return std::nullopt;
  const auto& samples = report.timing->samples_ms;
  const auto calls = static_cast<int64_t>(samples.size());
  // Two outside clocks, each fooled by something the other is not: the orchestrator's wall clock counts
  // time the worker spent blocked and the pipe's latency, the kernel's count of the worker's threads'
  // time on or waiting for a CPU counts a call's own threads several times over. The smaller of the two
  // is what the calls took at most, whatever the worker's own clocks say. (Time waiting for a CPU counts
  // on both sides: the worker's own clock sees it too, so that on a loaded machine a clock at half speed
  // shows as one, not as an honest clock of a descheduled worker.)
  double wall_harness = 0, cpu_harness = 0;
  const auto wall = implied_per_call(report.noop_seconds, report.noop_after_seconds, report.timing->noop_samples,
                                     report.timed_seconds, calls, wall_harness);
  if (!wall) return std::nullopt;
  const auto cpu = implied_per_call(report.noop_cpu_seconds, report.noop_after_cpu_seconds,
                                    report.timing->noop_samples, report.timed_cpu_seconds, calls, cpu_harness);
  const bool by_cpu = cpu && *cpu < *wall;
  double sum_ms = 0;
  for (double ms : samples) sum_ms += ms;
  OutsideClock clock;
  clock.by = by_cpu ? "cpu" : "wall";
  clock.harness_ms = (by_cpu ? cpu_harness : wall_harness) * 1e3;
  clock.implied_ms = (by_cpu ? *cpu : *wall) * 1e3;
  clock.reported_ms = sum_ms / static_cast<double>(calls);
  clock.wall_implied_ms = *wall * 1e3;
  if (cpu) clock.cpu_implied_ms = *cpu * 1e3;
  return clock;
}

std::optional<std::string> clock_disagrees(const WorkerReport& report, Device device) {
  if (!report.timing || report.timing->samples_ms.empty()) return std::nullopt;
  const auto clock = outside_clock_of(report);
  if (!clock) return std::string("the worker's clock marks around the timed calls are missing");
  const double slack_ms = kClockSlackFraction * clock->harness_ms +
                          1e3 * (device == Device::cuda ? kClockSlackCudaSeconds : kClockSlackCpuSeconds);
  const double explained = device == Device::cuda ? kClockExplainedFractionCuda : kClockExplainedFractionCpu;
  if (clock->reported_ms >= explained * clock->implied_ms - slack_ms) return std::nullopt;
  return fmt::format("by {} the timed calls took {:.4g} ms each beyond the harness's own {:.4g} ms, but the worker "
                     "reported {:.4g} ms each: its timer was not measuring the calls",
                     clock->by == "cpu" ? "the kernel's account of the worker's time on a CPU or waiting for one"
                                         : "the orchestrator's clock",
                     clock->implied_ms, clock->harness_ms, clock->reported_ms);
}

std::optional<SecondClock> second_clock_of(const WorkerReport& report) {
  if (!report.timing || report.timing->samples_ms.empty() || !report.timing->second_clock) return std::nullopt;
  const SecondClockReport& second = *report.timing->second_clock;
  if (!second.available || second.event_ms.empty() || second.busy_ms.empty()) return std::nullopt;
  return SecondClock{.event_ms = quantile_of(second.event_ms, 0.5), .busy_ms = quantile_of(second.busy_ms, 0.5),
                     .timed_median_ms = summarize(report.timing->samples_ms).median_ms};
}

std::optional<std::string> second_clock_disagrees(const SecondClockReport& second, double timed_median_ms) {
  if (!second.contexts_created.empty())
    return fmt::format("created a CUDA context of its own ({}): work there escapes the harness's synchronization and "
                       "its timers",
                       second.contexts_created.front());
  if (second.other_context > 0)
    return fmt::format("ran {} kernels or copies on another CUDA context during the calls", second.other_context);
  if (second.between_calls > 0)
    return fmt::format("launched {} kernels outside its calls (the device's own records show them between the timed "
                       "calls): work outside the calls is not timed",
                       second.between_calls);
  if (second.event_ms.empty() || second.busy_ms.size() != second.event_ms.size()) return std::nullopt;
  const double event = quantile_of(second.event_ms, 0.5), busy = quantile_of(second.busy_ms, 0.5);
  // The events bracket the call's stream; the device's records are all of the solution's work. Work on
  // other streams is charged by the timed loop (its host time), not by the events: the timer's account
  // of a call is the larger of the two. Device work beyond it means the timer did not bracket the work
  // (a timer that lies, events captured into a graph).
  const double timer = std::max(event, timed_median_ms);
  if (busy > kSecondClockFactor * timer + kSecondClockSlackMs)
    return fmt::format("the device's own records show {:.4g} ms of work per call, the timer {:.4g} ms (events {:.4g} ms, "
                       "timed median {:.4g} ms): the timer was not measuring the calls",
                       busy, timer, event, timed_median_ms);
  // A timer that lies only in the main loop: its median below what the same calls took under the second
  // clock (there warm, so if anything faster than the cold timed calls). Held against the faster of the
  // calls before the loop and those after it: a power cap can slow the device by a tenth between the loop
  // and either side (core/worker_protocol.hpp, kVerificationCallsBefore), never a timer's lie on both.
  const auto side = [&](std::size_t from, std::size_t to) {
    return quantile_of(std::vector<double>(second.busy_ms.begin() + static_cast<std::ptrdiff_t>(from),
                                           second.busy_ms.begin() + static_cast<std::ptrdiff_t>(to)), 0.5);
  };
  const std::size_t split = static_cast<std::size_t>(std::max(0, second.before_calls));
  const bool two_sides = split > 0 && split < second.busy_ms.size();
  const double fastest = two_sides ? std::min(side(0, split), side(split, second.busy_ms.size())) : busy;
  if (timed_median_ms < (fastest - kSecondClockSlackMs) / kSecondClockFactor)
    return fmt::format("the timed calls' median is {:.4g} ms, but the same calls under the device's own clock took "
                       "{:.4g} ms of work each{}: the timer was not measuring the calls",
                       timed_median_ms, fastest, two_sides ? " (the faster of the calls before and after the timed loop)" : "");
  return std::nullopt;
}

LightCheck faster_than_light(double median_ms, double flops, double min_bytes, const Ceilings& ceilings,
                             DType flops_dtype, Device device, int rotation_sets, int64_t rotation_bytes) {
  LightCheck light;
  const auto faster = below_floor(median_ms, 1.0, flops, min_bytes, ceilings, flops_dtype);
  if (!faster) return light;
  if (device == Device::cpu) {
    if (auto impossible = below_floor(median_ms, 0.8, flops, min_bytes, ceilings, flops_dtype))
      light.rejected = *impossible + "; on the cpu device times under 80% of it are impossible";
    else
      light.warning = *faster + ": faster than the speed of light (the cpu device's ceiling is a memcpy)";
    return light;
  }
  const int64_t set_bytes = rotation_bytes / std::max(1, rotation_sets);
  const bool cold = rotation_sets > 1 || set_bytes > static_cast<int64_t>(last_level_cache_bytes(device));
  if (!cold) {
    light.warning = *faster + ": faster than the speed of light, possible only because the inputs fit in the L2";
    return light;
  }
  // The measured rates are kernels' too: the matrix rate a library product's, run back to back at the
  // clock power allows it; the memory rate one streaming kernel's, which a kernel that reads as well can
  // match or beat by a few percent (moe/sum_reduce's expert read at 100.1% of it on an H200). Only the
  // device's bounds (every tensor core busy at the highest clock; the bus moving data on every memory
  // clock) are impossible to beat.
  if (auto impossible = below_floor(median_ms, 1.0, flops, min_bytes, ceilings, flops_dtype, FloorRate::bound))
    light.rejected = *impossible + "; with cold inputs no time under the floor is possible";
  else
    light.warning = *faster + ": faster than the measured rate, within the device's bound (a better scheduled "
                              "kernel than the ceiling's)";
  return light;
}

}  // namespace d2k
