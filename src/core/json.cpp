#include "core/json.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "core/overhead.hpp"
#include "core/summary.hpp"
#include "core/ceilings.hpp"

using nlohmann::json;

namespace d2k {
namespace {

std::string shown(const json& j) {
  std::string text = j.dump();
  return text.size() > 80 ? text.substr(0, 77) + "..." : text;
}

void expect_object(const json& j, std::string_view what) {
  if (!j.is_object()) fail("{}: expected an object, got {}", what, shown(j));
}

// Reads one field; a failure names the field (nested names accumulate: "inputs: dtype: ...").
template <typename T>
void read_field(const json& j, const char* key, T& out) {
  auto found = j.find(key);
  if (found == j.end()) fail("missing field '{}'", key);
  try {
    found->get_to(out);
  } catch (const json::exception& error) {
    fail("field '{}' = {}: {}", key, shown(*found), error.what());
  } catch (const Error& error) {
    fail("field '{}': {}", key, error.what());
  }
}

// Leaves `out` at its default when the field is absent or null.
template <typename T>
void read_optional(const json& j, const char* key, T& out) {
  if (!j.contains(key) || j.at(key).is_null()) return;
  read_field(j, key, out);
}

std::vector<int64_t> row_major(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

}  // namespace

// Enums ------------------------------------------------------------------------------------------

void to_json(json& j, Device value) { j = std::string(name_of(value)); }
void from_json(const json& j, Device& value) {
  std::optional<Device> parsed = j.is_string() ? parse_device(j.get<std::string>()) : std::nullopt;
  if (!parsed) fail("unknown device {} (expected \"cuda\" or \"cpu\")", shown(j));
  value = *parsed;
}

void to_json(json& j, DType value) { j = std::string(name_of(value)); }
void from_json(const json& j, DType& value) {
  std::optional<DType> parsed = j.is_string() ? parse_dtype(j.get<std::string>()) : std::nullopt;
  if (!parsed) fail("unknown dtype {}", shown(j));
  value = *parsed;
}

// Worker protocol --------------------------------------------------------------------------------

void to_json(json& j, const WireTensor& value) {
  j = json{{"name", value.name},     {"dtype", value.dtype}, {"shape", value.shape},
           {"strides", value.strides}, {"inplace", value.inplace}, {"prepare", value.prepare},
           {"perturb", value.perturb}, {"relabel", value.relabel}};
}
void from_json(const json& j, WireTensor& value) {
  expect_object(j, "tensor");
  read_field(j, "name", value.name);
  read_field(j, "dtype", value.dtype);
  read_field(j, "shape", value.shape);
  value.strides.clear();
  read_optional(j, "strides", value.strides);
  if (value.strides.empty() && !value.shape.empty()) value.strides = row_major(value.shape);
  if (value.strides.size() != value.shape.size()) {
    fail("tensor '{}': {} strides for {} dimensions", value.name, value.strides.size(), value.shape.size());
  }
  read_optional(j, "inplace", value.inplace);
  read_optional(j, "prepare", value.prepare);
  read_optional(j, "perturb", value.perturb);
  read_optional(j, "relabel", value.relabel);
}

void to_json(json& j, const WireScalar& value) {
  j = json{{"name", value.name}, {"is_int", value.is_int}, {"value", value.value}};
}
void from_json(const json& j, WireScalar& value) {
  expect_object(j, "scalar");
  read_field(j, "name", value.name);
  read_optional(j, "is_int", value.is_int);
  read_field(j, "value", value.value);
}

void to_json(json& j, const TimingConfig& value) {
  j = json{{"warmup", value.warmup},
           {"min_samples", value.min_samples},
           {"max_samples", value.max_samples},
           {"max_seconds", value.max_seconds},
           {"target_ci", value.target_ci},
           {"flush_l2", value.flush_l2},
           {"rotate_cache_multiple", value.rotate_cache_multiple},
           {"rotate_max_sets", value.rotate_max_sets},
           {"rotate_max_bytes", value.rotate_max_bytes}};
}
void from_json(const json& j, TimingConfig& value) {
  expect_object(j, "timing");
  read_optional(j, "warmup", value.warmup);
  read_optional(j, "min_samples", value.min_samples);
  read_optional(j, "max_samples", value.max_samples);
  read_optional(j, "max_seconds", value.max_seconds);
  read_optional(j, "target_ci", value.target_ci);
  read_optional(j, "flush_l2", value.flush_l2);
  read_optional(j, "rotate_cache_multiple", value.rotate_cache_multiple);
  read_optional(j, "rotate_max_sets", value.rotate_max_sets);
  read_optional(j, "rotate_max_bytes", value.rotate_max_bytes);
}

void to_json(json& j, const WorkerRequest& value) {
  j = json{{"token", value.token},           {"library", value.library},
           {"device", value.device},         {"inputs", value.inputs},
           {"outputs", value.outputs},       {"scalars", value.scalars},
           {"time", value.time},             {"deterministic", value.deterministic},
           {"second_draw", value.second_draw}, {"timing", value.timing},
           {"digest_key", value.digest_key}, {"patch_seed", value.patch_seed},
           {"patch_swaps", value.patch_swaps}, {"sample_seed", value.sample_seed},
           {"sampled_calls", value.sampled_calls}};
  if (value.seeded_calls > 0) {
    j["seeded_calls"] = value.seeded_calls;
    j["seed_scalar"] = value.seed_scalar;
    j["seed_key"] = value.seed_key;
  }
  if (value.python) {
    const WirePython& p = *value.python;
    j["python"] = json{{"library", p.library}, {"home", p.home}, {"site", p.site}, {"cache", p.cache},
                       {"entry", p.entry}, {"modules", p.modules}, {"capability", p.capability}};
  }
}
void from_json(const json& j, WorkerRequest& value) {
  expect_object(j, "request");
  read_field(j, "token", value.token);
  read_field(j, "library", value.library);
  read_field(j, "device", value.device);
  read_optional(j, "inputs", value.inputs);
  read_optional(j, "outputs", value.outputs);
  read_optional(j, "scalars", value.scalars);
  read_optional(j, "time", value.time);
  read_optional(j, "deterministic", value.deterministic);
  read_optional(j, "second_draw", value.second_draw);
  read_optional(j, "timing", value.timing);
  read_optional(j, "digest_key", value.digest_key);
  read_optional(j, "patch_seed", value.patch_seed);
  read_optional(j, "patch_swaps", value.patch_swaps);
  read_optional(j, "sample_seed", value.sample_seed);
  read_optional(j, "sampled_calls", value.sampled_calls);
  read_optional(j, "seeded_calls", value.seeded_calls);
  read_optional(j, "seed_scalar", value.seed_scalar);
  read_optional(j, "seed_key", value.seed_key);
  if (j.contains("python")) {
    const json& p = j.at("python");
    expect_object(p, "python");
    WirePython python;
    read_field(p, "library", python.library);
    read_field(p, "home", python.home);
    read_field(p, "site", python.site);
    read_field(p, "cache", python.cache);
    read_field(p, "entry", python.entry);
    read_optional(p, "modules", python.modules);
    read_optional(p, "capability", python.capability);
    value.python = python;
  }
}

void to_json(json& j, const GuardViolation& value) {
  j = json{{"tensor", value.tensor}, {"side", value.side}, {"bytes", value.bytes}};
}
void from_json(const json& j, GuardViolation& value) {
  expect_object(j, "guard violation");
  read_field(j, "tensor", value.tensor);
  read_field(j, "side", value.side);
  read_field(j, "bytes", value.bytes);
}

void to_json(json& j, Stage value) { j = std::string(name_of(value)); }
void from_json(const json& j, Stage& value) {
  std::optional<Stage> parsed = j.is_string() ? parse_stage(j.get<std::string>()) : std::nullopt;
  if (!parsed) fail("unknown worker stage {}", shown(j));
  value = *parsed;
}

void to_json(json& j, WorkerStatus value) { j = std::string(name_of(value)); }
void from_json(const json& j, WorkerStatus& value) {
  std::optional<WorkerStatus> parsed = j.is_string() ? parse_worker_status(j.get<std::string>()) : std::nullopt;
  if (!parsed) fail("unknown worker status {}", shown(j));
  value = *parsed;
}

void to_json(json& j, const WorkerFailure& value) {
  j = json{{"status", value.status}, {"stage", value.stage}, {"message", value.message}};
}
void from_json(const json& j, WorkerFailure& value) {
  expect_object(j, "failure");
  read_field(j, "status", value.status);
  read_field(j, "stage", value.stage);
  read_field(j, "message", value.message);
}

void to_json(json& j, const SecondClockReport& value) {
  j = json{{"available", value.available},         {"unavailable", value.unavailable},
           {"event_ms", value.event_ms},           {"busy_ms", value.busy_ms},
           {"other_context", value.other_context}, {"between_calls", value.between_calls},
           {"contexts_created", value.contexts_created}, {"before_calls", value.before_calls}};
}
void from_json(const json& j, SecondClockReport& value) {
  expect_object(j, "second clock");
  read_optional(j, "available", value.available);
  read_optional(j, "unavailable", value.unavailable);
  read_optional(j, "event_ms", value.event_ms);
  read_optional(j, "busy_ms", value.busy_ms);
  read_optional(j, "other_context", value.other_context);
  read_optional(j, "between_calls", value.between_calls);
  read_optional(j, "contexts_created", value.contexts_created);
  read_optional(j, "before_calls", value.before_calls);
}

void to_json(json& j, const TimingReport& value) {
  j = json{{"samples_ms", value.samples_ms},
           {"calls", value.calls},
           {"rotation_sets", value.rotation_sets},
           {"rotation_bytes", value.rotation_bytes},
           {"noop_samples", value.noop_samples},
           {"clocks", value.clocks ? json(*value.clocks) : json(nullptr)},
           {"second_clock", value.second_clock ? json(*value.second_clock) : json(nullptr)}};
}
void from_json(const json& j, TimingReport& value) {
  expect_object(j, "timing report");
  read_optional(j, "samples_ms", value.samples_ms);
  read_optional(j, "calls", value.calls);
  read_optional(j, "rotation_sets", value.rotation_sets);
  read_optional(j, "rotation_bytes", value.rotation_bytes);
  read_optional(j, "noop_samples", value.noop_samples);
  value.clocks.reset();
  if (j.contains("clocks") && !j.at("clocks").is_null()) value.clocks = j.at("clocks").get<GpuClocks>();
  value.second_clock.reset();
  if (j.contains("second_clock") && !j.at("second_clock").is_null())
    value.second_clock = j.at("second_clock").get<SecondClockReport>();
}

// Ceilings ---------------------------------------------------------------------------------------

void to_json(json& j, const Ceilings& value) {
  j = json{{"device_name", value.device_name},
           {"device_id", value.device_id},
           {"copy_gbps", value.copy_gbps},
           {"read_gbps", value.read_gbps},
           {"bf16_tflops", value.bf16_tflops ? json(*value.bf16_tflops) : json(nullptr)},
           {"fp8_tflops", value.fp8_tflops ? json(*value.fp8_tflops) : json(nullptr)},
           {"int8_tops", value.int8_tops ? json(*value.int8_tops) : json(nullptr)},
           {"fp8_config", value.fp8_config},
           {"int8_config", value.int8_config},
           {"sm_count", value.sm_count},
           {"sm_max_mhz", value.sm_max_mhz},
           {"compute_capability", value.compute_capability},
           {"memory_max_mhz", value.memory_max_mhz},
           {"memory_bus_bits", value.memory_bus_bits},
           {"measured_at", value.measured_at}};
}
void from_json(const json& j, Ceilings& value) {
  expect_object(j, "ceilings");
  read_field(j, "device_name", value.device_name);
  read_field(j, "device_id", value.device_id);
  read_field(j, "copy_gbps", value.copy_gbps);
  // A cache from before the read rate was measured: unknown (0), so the copy rate alone sets the floor.
  value.read_gbps = 0;
  if (j.contains("read_gbps")) read_field(j, "read_gbps", value.read_gbps);
  // A cache written before a rate was measured lacks its key: the rate is then unknown.
  const auto rate = [&](const char* key, std::optional<double>& out) {
    out.reset();
    if (j.contains(key) && !j.at(key).is_null()) {
      double number = 0;
      read_field(j, key, number);
      out = number;
    }
  };
  rate("bf16_tflops", value.bf16_tflops);
  rate("fp8_tflops", value.fp8_tflops);
  rate("int8_tops", value.int8_tops);
  read_optional(j, "fp8_config", value.fp8_config);
  read_optional(j, "int8_config", value.int8_config);
  read_optional(j, "measured_at", value.measured_at);
  // Unknown (0) in a cache from before they were recorded: the matrix bound is then unknown too.
  read_optional(j, "sm_count", value.sm_count);
  read_optional(j, "sm_max_mhz", value.sm_max_mhz);
  read_optional(j, "compute_capability", value.compute_capability);
  // Unknown (0) in a cache from before they were recorded: the memory bound is then unknown too.
  read_optional(j, "memory_max_mhz", value.memory_max_mhz);
  read_optional(j, "memory_bus_bits", value.memory_bus_bits);
}

// Traces
namespace {

// JSON has no infinity or NaN: write them as null and read null back as infinity.
nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }
double number_from(const nlohmann::json& j) {
  return j.is_null() ? std::numeric_limits<double>::infinity() : j.get<double>();
}
template <typename T>
nlohmann::json optional(const std::optional<T>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }
template <typename T>
void optional_from(const nlohmann::json& j, const char* key, std::optional<T>& v) {
  if (j.contains(key) && !j.at(key).is_null()) v = j.at(key).get<T>();
}

}  // namespace


void to_json(nlohmann::json& j, Status value) { j = std::string(name_of(value)); }
void from_json(const nlohmann::json& j, Status& value) {
  auto parsed = parse_status(j.get<std::string>());
  if (!parsed) fail("trace status: unknown value '{}'", j.get<std::string>());
  value = *parsed;
}

void to_json(nlohmann::json& j, const Comparison& c) {
  j = {{"name", c.name}, {"metric", c.metric}, {"passed", c.passed}, {"nmse", number(c.nmse)},
       {"max_abs_error", number(c.max_abs_error)}, {"max_rel_error", number(c.max_rel_error)},
       {"worst_excess", number(c.worst_excess)}, {"mismatches", c.mismatches}, {"non_finite", c.non_finite},
       {"worst_index", c.worst_index}, {"worst_got", number(c.worst_got)}, {"worst_want", number(c.worst_want)},
       {"elements", c.elements}};
  if (c.misrounded) j["misrounded"] = number(*c.misrounded);
  if (!c.detail.empty()) j["detail"] = c.detail;
}
void from_json(const nlohmann::json& j, Comparison& c) {
  c.name = j.at("name");
  c.metric = j.at("metric");
  c.passed = j.at("passed");
  c.nmse = number_from(j.at("nmse"));
  c.max_abs_error = number_from(j.at("max_abs_error"));
  c.max_rel_error = number_from(j.at("max_rel_error"));
  c.worst_excess = number_from(j.at("worst_excess"));
  c.mismatches = j.at("mismatches");
  c.non_finite = j.at("non_finite");
  c.worst_index = j.at("worst_index");
  c.worst_got = number_from(j.at("worst_got"));
  c.worst_want = number_from(j.at("worst_want"));
  c.elements = j.at("elements");
  if (j.contains("misrounded")) c.misrounded = number_from(j.at("misrounded"));
  if (j.contains("detail")) c.detail = j.at("detail");
}

void to_json(nlohmann::json& j, const TimingSummary& t) {
  j = {{"median_ms", t.median_ms}, {"p10_ms", t.p10_ms}, {"p90_ms", t.p90_ms},
       {"min_ms", t.min_ms}, {"mean_ms", t.mean_ms}, {"ci_low_ms", t.ci_low_ms},
       {"ci_high_ms", t.ci_high_ms}, {"samples", t.samples}};
}
void from_json(const nlohmann::json& j, TimingSummary& t) {
  t.median_ms = j.at("median_ms");
  t.p10_ms = j.at("p10_ms");
  t.p90_ms = j.at("p90_ms");
  t.min_ms = j.at("min_ms");
  t.mean_ms = j.at("mean_ms");
  t.ci_low_ms = j.value("ci_low_ms", 0.0);
  t.ci_high_ms = j.value("ci_high_ms", 0.0);
  t.samples = j.at("samples");
}

void to_json(nlohmann::json& j, const ClockReading& r) {
  j = {{"sm_mhz", r.sm_mhz}, {"sm_max_mhz", r.sm_max_mhz}, {"sm_application_mhz", r.sm_application_mhz},
       {"memory_mhz", r.memory_mhz}, {"temperature_c", r.temperature_c}, {"power_w", r.power_w},
       {"throttle_reasons", r.throttle_reasons}};
}
void from_json(const nlohmann::json& j, ClockReading& r) {
  expect_object(j, "clock reading");
  read_optional(j, "sm_mhz", r.sm_mhz);
  read_optional(j, "sm_max_mhz", r.sm_max_mhz);
  read_optional(j, "sm_application_mhz", r.sm_application_mhz);
  read_optional(j, "memory_mhz", r.memory_mhz);
  read_optional(j, "temperature_c", r.temperature_c);
  read_optional(j, "power_w", r.power_w);
  read_optional(j, "throttle_reasons", r.throttle_reasons);
}

void to_json(nlohmann::json& j, const GpuClocks& c) {
  j = {{"available", c.available}, {"unavailable", c.unavailable}, {"before", c.before}, {"after", c.after},
       {"reasons", c.reasons}, {"throttled", c.throttled}, {"warning", c.warning}};
}
void from_json(const nlohmann::json& j, GpuClocks& c) {
  expect_object(j, "clocks");
  read_field(j, "available", c.available);
  read_optional(j, "unavailable", c.unavailable);
  read_optional(j, "before", c.before);
  read_optional(j, "after", c.after);
  read_optional(j, "reasons", c.reasons);
  read_optional(j, "throttled", c.throttled);
  read_optional(j, "warning", c.warning);
}

void to_json(nlohmann::json& j, const OutsideClock& c) {
  j = {{"by", c.by}, {"harness_ms", c.harness_ms}, {"implied_ms", c.implied_ms}, {"reported_ms", c.reported_ms},
       {"wall_implied_ms", optional(c.wall_implied_ms)}, {"cpu_implied_ms", optional(c.cpu_implied_ms)}};
}
void from_json(const nlohmann::json& j, OutsideClock& c) {
  expect_object(j, "outside_clock");
  read_field(j, "by", c.by);
  read_field(j, "harness_ms", c.harness_ms);
  read_field(j, "implied_ms", c.implied_ms);
  read_field(j, "reported_ms", c.reported_ms);
  optional_from(j, "wall_implied_ms", c.wall_implied_ms);
  optional_from(j, "cpu_implied_ms", c.cpu_implied_ms);
}

void to_json(nlohmann::json& j, const SecondClock& c) {
  j = {{"event_ms", c.event_ms}, {"busy_ms", c.busy_ms}, {"timed_median_ms", c.timed_median_ms}};
}
void from_json(const nlohmann::json& j, SecondClock& c) {
  expect_object(j, "second_clock");
  read_field(j, "event_ms", c.event_ms);
  read_field(j, "busy_ms", c.busy_ms);
  read_field(j, "timed_median_ms", c.timed_median_ms);
}

void to_json(nlohmann::json& j, const Phase& p) { j = {{"name", p.name}, {"seconds", p.seconds}}; }
void from_json(const nlohmann::json& j, Phase& p) {
  expect_object(j, "phase");
  read_field(j, "name", p.name);
  read_field(j, "seconds", p.seconds);
}

void to_json(nlohmann::json& j, const Performance& p) {
  j = {{"solution", p.solution}, {"baseline", optional(p.baseline)}, {"speedup", optional(p.speedup)},
       {"library", optional(p.library)}, {"speedup_over_library", optional(p.speedup_over_library)},
       {"flops", p.flops}, {"min_bytes", p.min_bytes}, {"achieved_gbps", p.achieved_gbps},
       {"achieved_tflops", p.achieved_tflops}, {"sol_fraction", optional(p.sol_fraction)},
       {"rotation_sets", p.rotation_sets}, {"rotation_bytes", p.rotation_bytes}};
}
void from_json(const nlohmann::json& j, Performance& p) {
  p.solution = j.at("solution");
  optional_from(j, "baseline", p.baseline);
  optional_from(j, "speedup", p.speedup);
  optional_from(j, "library", p.library);
  optional_from(j, "speedup_over_library", p.speedup_over_library);
  p.flops = j.at("flops");
  p.min_bytes = j.at("min_bytes");
  p.achieved_gbps = j.at("achieved_gbps");
  p.achieved_tflops = j.at("achieved_tflops");
  optional_from(j, "sol_fraction", p.sol_fraction);
  p.rotation_sets = j.value("rotation_sets", 1);
  p.rotation_bytes = j.value("rotation_bytes", int64_t{0});
}

void to_json(nlohmann::json& j, const Trace& t) {
  j = {{"task", t.task}, {"workload", t.workload}, {"solution", t.solution}, {"device", t.device},
       {"device_name", t.device_name}, {"status", t.status}, {"message", t.message}, {"seed", t.seed},
       {"comparisons", t.comparisons}, {"performance", optional(t.performance)}, {"timestamp", t.timestamp},
       {"clocks", optional(t.clocks)}, {"outside_clock", optional(t.outside_clock)},
       {"second_clock", optional(t.second_clock)}, {"phases", t.phases}, {"wall_seconds", t.wall_seconds}, {"warnings", t.warnings},
       {"log", t.log}};
}
void to_json(nlohmann::json& j, const Overhead& o) {
  j = {{"workloads", o.workloads}, {"wall_seconds", o.wall_seconds},
       {"solution_timing_seconds", o.solution_timing_seconds}, {"baseline_timing_seconds", o.baseline_timing_seconds},
       {"overhead_seconds", o.overhead_seconds}, {"largest_phase", o.largest_phase},
       {"largest_phase_seconds", o.largest_phase_seconds}};
}

void from_json(const nlohmann::json& j, Trace& t) {
  t.task = j.at("task");
  t.workload = j.at("workload");
  t.solution = j.at("solution");
  t.device = j.at("device");
  t.device_name = j.at("device_name");
  t.status = j.at("status");
  t.message = j.at("message");
  t.seed = j.at("seed");
  t.comparisons = j.at("comparisons").get<std::vector<Comparison>>();
  optional_from(j, "performance", t.performance);
  t.timestamp = j.at("timestamp");
  optional_from(j, "clocks", t.clocks);
  optional_from(j, "outside_clock", t.outside_clock);
  optional_from(j, "second_clock", t.second_clock);
  if (j.contains("phases")) t.phases = j.at("phases").get<std::vector<Phase>>();
  t.wall_seconds = j.value("wall_seconds", 0.0);
  if (j.contains("warnings")) t.warnings = j.at("warnings").get<std::vector<std::string>>();
  t.log = j.at("log");
}

void to_json(nlohmann::json& j, const RepeatRow& r) {
  j = {{"task", r.task}, {"workload", r.workload}, {"runs", r.runs}, {"passed", r.passed},
       {"failures", r.failures}, {"medians_ms", r.medians_ms}, {"median_ms", r.median_ms},
       {"min_ms", r.min_ms}, {"max_ms", r.max_ms}, {"spread", r.spread}};
}

void to_json(nlohmann::json& j, const RunSummary& s) {
  j = {{"passed", s.passed},
       {"total", s.total},
       {"geomean_speedup", optional(s.geomean_speedup)},
       {"geomean_speedup_over_library", optional(s.geomean_speedup_over_library)},
       {"over_library", s.over_library},
       {"throttled", s.throttled},
       {"overhead", s.overhead}};
}

}  // namespace d2k
