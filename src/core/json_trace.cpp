// The trace half of core/json.hpp.
#include <cmath>

#include "core/error.hpp"
#include "core/json.hpp"

namespace d2k {
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
}

void to_json(nlohmann::json& j, const TimingSummary& t) {
  j = {{"median_ms", t.median_ms}, {"p10_ms", t.p10_ms}, {"p90_ms", t.p90_ms},
       {"min_ms", t.min_ms}, {"mean_ms", t.mean_ms}, {"samples", t.samples}};
}
void from_json(const nlohmann::json& j, TimingSummary& t) {
  t.median_ms = j.at("median_ms");
  t.p10_ms = j.at("p10_ms");
  t.p90_ms = j.at("p90_ms");
  t.min_ms = j.at("min_ms");
  t.mean_ms = j.at("mean_ms");
  t.samples = j.at("samples");
}

void to_json(nlohmann::json& j, const Performance& p) {
  j = {{"solution", p.solution}, {"baseline", optional(p.baseline)}, {"speedup", optional(p.speedup)},
       {"flops", p.flops}, {"min_bytes", p.min_bytes}, {"achieved_gbps", p.achieved_gbps},
       {"achieved_tflops", p.achieved_tflops}, {"sol_fraction", optional(p.sol_fraction)}};
}
void from_json(const nlohmann::json& j, Performance& p) {
  p.solution = j.at("solution");
  optional_from(j, "baseline", p.baseline);
  optional_from(j, "speedup", p.speedup);
  p.flops = j.at("flops");
  p.min_bytes = j.at("min_bytes");
  p.achieved_gbps = j.at("achieved_gbps");
  p.achieved_tflops = j.at("achieved_tflops");
  optional_from(j, "sol_fraction", p.sol_fraction);
}

void to_json(nlohmann::json& j, const Trace& t) {
  j = {{"task", t.task}, {"workload", t.workload}, {"solution", t.solution}, {"device", t.device},
       {"device_name", t.device_name}, {"status", t.status}, {"message", t.message}, {"seed", t.seed},
       {"comparisons", t.comparisons}, {"performance", optional(t.performance)}, {"timestamp", t.timestamp},
       {"log", t.log}};
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
  t.log = j.at("log");
}

}  // namespace d2k
