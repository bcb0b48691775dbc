#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/json.hpp"

namespace d2k {
namespace {

Trace sample_trace() {
  Trace t;
  t.task = "norm/fused_add_rmsnorm";
  t.workload = "llama3-8b-T2048";
  t.solution = "cuda";
  t.device = Device::cuda;
  t.device_name = "NVIDIA H200";
  t.status = Status::incorrect_numerics;
  t.message = "'x': 3 of 8388608 elements outside tolerance";
  t.seed = 42;
  Comparison c;
  c.name = "x";
  c.metric = "numeric";
  c.nmse = std::numeric_limits<double>::infinity();  // a NaN in the output
  c.max_abs_error = 0.25;
  c.mismatches = 3;
  c.non_finite = 1;
  c.worst_index = 17;
  c.elements = 8388608;
  t.comparisons = {c};
  Performance p;
  p.solution = TimingSummary{.median_ms = 0.018, .p10_ms = 0.0175, .p90_ms = 0.019, .min_ms = 0.017, .mean_ms = 0.0181,
                             .ci_low_ms = 0.0178, .ci_high_ms = 0.0183, .samples = 200};
  p.baseline = TimingSummary{.median_ms = 0.145, .p10_ms = 0.14, .p90_ms = 0.15, .min_ms = 0.139, .mean_ms = 0.146,
                             .ci_low_ms = 0.144, .ci_high_ms = 0.147, .samples = 120};
  p.speedup = 8.05;
  p.min_bytes = 67117056;
  p.achieved_gbps = 3728.7;
  t.performance = p;
  t.timestamp = "2026-11-30T00:37:25Z";
  t.performance->rotation_sets = 3;
  t.performance->rotation_bytes = 201351168;
  GpuClocks clocks;
  clocks.available = true;
  clocks.before = ClockReading{.sm_mhz = 345, .sm_max_mhz = 1980, .sm_application_mhz = 1980, .memory_mhz = 3201,
                               .temperature_c = 38, .power_w = 80.5, .throttle_reasons = 1};
  clocks.after = ClockReading{.sm_mhz = 1980, .sm_max_mhz = 1980, .sm_application_mhz = 1980, .memory_mhz = 3201,
                              .temperature_c = 44, .power_w = 410.0, .throttle_reasons = 0};
  t.clocks = clocks;
  t.phases = {{"inputs", 0.5}, {"solution_timing", 1.25}};
  t.wall_seconds = 2.0;
  return t;
}

TEST(JsonTrace, RoundTripsEveryField) {
  const Trace t = sample_trace();
  const Trace back = nlohmann::json::parse(nlohmann::json(t).dump()).get<Trace>();
  EXPECT_EQ(nlohmann::json(back), nlohmann::json(t));
  EXPECT_EQ(back.status, Status::incorrect_numerics);
  ASSERT_TRUE(back.performance && back.performance->baseline);
  EXPECT_DOUBLE_EQ(back.performance->baseline->median_ms, 0.145);
  EXPECT_FALSE(back.performance->sol_fraction.has_value());
  EXPECT_EQ(back.performance->rotation_sets, 3);
  ASSERT_TRUE(back.clocks);
  EXPECT_EQ(back.clocks->after.sm_mhz, 1980u);
  EXPECT_DOUBLE_EQ(back.clocks->before.power_w, 80.5);
  ASSERT_EQ(back.phases.size(), 2u);
  EXPECT_EQ(back.phases[1].name, "solution_timing");
  EXPECT_DOUBLE_EQ(back.wall_seconds, 2.0);
}

TEST(JsonTrace, TheLibraryBaselineRoundTripsAndIsNullWhenAbsent) {
  Trace t = sample_trace();
  EXPECT_TRUE(nlohmann::json(t)["performance"]["library"].is_null());
  EXPECT_TRUE(nlohmann::json(t)["performance"]["speedup_over_library"].is_null());
  t.performance->library = TimingSummary{.median_ms = 0.021, .samples = 80};
  t.performance->speedup_over_library = 0.021 / 0.018;
  const auto j = nlohmann::json(t);
  EXPECT_DOUBLE_EQ(j["performance"]["library"]["median_ms"].get<double>(), 0.021);
  const Trace back = nlohmann::json::parse(j.dump()).get<Trace>();
  ASSERT_TRUE(back.performance->library);
  EXPECT_EQ(back.performance->library->samples, 80);
  EXPECT_DOUBLE_EQ(*back.performance->speedup_over_library, 0.021 / 0.018);
  EXPECT_EQ(nlohmann::json(back), j);
}

TEST(JsonTrace, InfinityIsWrittenAsNullAndReadBack) {
  const auto j = nlohmann::json(sample_trace());
  EXPECT_TRUE(j["comparisons"][0]["nmse"].is_null());
  EXPECT_EQ(j["status"], "incorrect_numerics");
  EXPECT_EQ(j["device"], "cuda");
  EXPECT_TRUE(std::isinf(j.get<Trace>().comparisons[0].nmse));
}

TEST(JsonTrace, UnknownStatusIsAnErrorNamingTheValue) {
  auto j = nlohmann::json(sample_trace());
  j["status"] = "fast";
  try {
    (void)j.get<Trace>();
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("'fast'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace d2k
