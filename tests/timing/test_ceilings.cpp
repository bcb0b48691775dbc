#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "core/json.hpp"
#include "timing/ceilings.hpp"
#include "timing/ceilings_lt.hpp"
#include "timing/device_info.hpp"

namespace fs = std::filesystem;
using namespace d2k;

TEST(Ceilings, CpuCopyAndReadAreMeasuredAndCached) {
  fs::path dir = fs::path(testing::TempDir()) / ("d2k-ceilings-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  Ceilings first = cached_ceilings(Device::cpu, dir, false, nullptr);
  EXPECT_GT(first.copy_gbps, 0.1);
  EXPECT_LT(first.copy_gbps, 2000.0);
  EXPECT_GT(first.read_gbps, 0.1);
  EXPECT_LT(first.read_gbps, 2000.0);
  EXPECT_FALSE(first.bf16_tflops.has_value());
  EXPECT_FALSE(first.fp8_tflops.has_value());
  EXPECT_FALSE(first.int8_tops.has_value());
  EXPECT_EQ(first.device_id, device_id(Device::cpu));
  EXPECT_FALSE(first.device_name.empty());
  EXPECT_EQ(first.measured_at.size(), 20u);  // 2025-01-02T03:04:05Z

  fs::path file = ceilings_file(Device::cpu, dir);
  ASSERT_TRUE(fs::exists(file));
  EXPECT_TRUE(file.filename().string().starts_with("ceilings-cpu-"));
  for (char c : file.filename().string())
    EXPECT_TRUE(std::isalnum(c) || c == '.' || c == '_' || c == '-') << c;

  // A changed cache file is what comes back: it was read, not measured again.
  Ceilings edited = first;
  edited.copy_gbps = 12345.5;
  edited.read_gbps = 23456.5;
  edited.bf16_tflops = 7.25;
  edited.fp8_tflops = 14.5;
  edited.int8_tops = 13.75;
  std::ofstream(file) << nlohmann::json(edited).dump();
  Ceilings second = cached_ceilings(Device::cpu, dir, false, nullptr);
  EXPECT_DOUBLE_EQ(second.copy_gbps, 12345.5);
  EXPECT_DOUBLE_EQ(second.read_gbps, 23456.5);
  ASSERT_TRUE(second.bf16_tflops.has_value());
  EXPECT_DOUBLE_EQ(*second.bf16_tflops, 7.25);
  ASSERT_TRUE(second.fp8_tflops.has_value());
  EXPECT_DOUBLE_EQ(*second.fp8_tflops, 14.5);
  ASSERT_TRUE(second.int8_tops.has_value());
  EXPECT_DOUBLE_EQ(*second.int8_tops, 13.75);
  EXPECT_EQ(second.measured_at, first.measured_at);

  std::ostringstream progress;
  Ceilings refreshed = cached_ceilings(Device::cpu, dir, true, &progress);
  EXPECT_LT(refreshed.copy_gbps, 2000.0);
  EXPECT_NE(progress.str().find("measuring"), std::string::npos);
  fs::remove_all(dir);
}

// A cache written before the fp8 and int8 rates were measured still reads: those rates are unknown.
TEST(Ceilings, ACacheWithoutTheNewerRatesReadsAsUnknownRates) {
  const auto old = nlohmann::json::parse(R"({"device_name": "NVIDIA H200", "device_id": "GPU-1234",
      "copy_gbps": 4203.5, "bf16_tflops": 773.0, "measured_at": "2026-11-29T10:00:00Z"})");
  const Ceilings read = old.get<Ceilings>();
  EXPECT_DOUBLE_EQ(read.copy_gbps, 4203.5);
  EXPECT_EQ(read.read_gbps, 0.0);  // unknown: the copy rate alone sets the floor
  EXPECT_DOUBLE_EQ(read.memory_gbps(), 4203.5);
  ASSERT_TRUE(read.bf16_tflops.has_value());
  EXPECT_DOUBLE_EQ(*read.bf16_tflops, 773.0);
  EXPECT_FALSE(read.fp8_tflops.has_value());
  EXPECT_FALSE(read.int8_tops.has_value());
}

// A d2k before the one-byte rates recorded their configuration failed at fp8 on the H200 and cached
// the rate as unknown: such a cache is measured again; one written since is kept even without an fp8
// rate (a GPU without fp8 would otherwise be measured on every start).
TEST(Ceilings, AnOldCacheWithoutTheFp8RateIsMeasuredAgain) {
  fs::path dir = fs::path(testing::TempDir()) / ("d2k-ceilings-old-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path file = ceilings_file(Device::cpu, dir);
  nlohmann::json old = {{"device_name", "cpu"},     {"device_id", device_id(Device::cpu)},
                        {"copy_gbps", 12345.5},     {"bf16_tflops", nullptr},
                        {"fp8_tflops", nullptr},    {"int8_tops", nullptr},
                        {"measured_at", "2026-11-30T03:00:00Z"}};
  std::ofstream(file) << old.dump();
  const Ceilings measured = cached_ceilings(Device::cpu, dir, false, nullptr);
  EXPECT_LT(measured.copy_gbps, 2000.0);
  EXPECT_NE(measured.measured_at, "2026-11-30T03:00:00Z");

  old["fp8_config"] = "";
  old["int8_config"] = "";
  old["read_gbps"] = 23456.5;
  std::ofstream(file) << old.dump();
  const Ceilings kept = cached_ceilings(Device::cpu, dir, false, nullptr);
  EXPECT_DOUBLE_EQ(kept.copy_gbps, 12345.5);
  EXPECT_FALSE(kept.fp8_tflops.has_value());
  fs::remove_all(dir);
}

TEST(Ceilings, TheConfigurationsOfTheRatesAreCached) {
  Ceilings ceilings;
  ceilings.device_name = "NVIDIA H200";
  ceilings.device_id = "GPU-1234";
  ceilings.fp8_tflops = 1500.0;
  ceilings.fp8_config = "e4m3 TN -> bf16 (C bf16, in place), A/B scales, compute 32F";
  ceilings.int8_tops = 1480.0;
  ceilings.int8_config = "i8 TN -> i32 (C i32, in place), compute 32I";
  const Ceilings read = nlohmann::json::parse(nlohmann::json(ceilings).dump()).get<Ceilings>();
  EXPECT_EQ(read.fp8_config, ceilings.fp8_config);
  EXPECT_EQ(read.int8_config, ceilings.int8_config);
}

#ifdef D2K_WITH_CUDA
// Hopper's fp8 and int8 kernels take only TN (both operands K-major); every configuration the ceilings
// try keeps to it, the first is the one docs/metrics.md describes, and no two read the same.
TEST(CeilingsLt, ConfigurationsAreTnAndTheFirstIsTheDocumentedOne) {
  const std::vector<LtConfig> fp8 = fp8_configs();
  ASSERT_GE(fp8.size(), 3u);
  EXPECT_EQ(fp8.front().describe(), "e4m3 TN -> bf16 (C bf16, in place), A/B scales, compute 32F");
  const std::vector<LtConfig> int8 = int8_configs();
  ASSERT_GE(int8.size(), 1u);
  EXPECT_EQ(int8.front().describe(), "i8 TN -> i32 (C i32, in place), compute 32I");
  std::set<std::string> seen;
  for (const auto& [configs, operand] : {std::pair{&fp8, CUDA_R_8F_E4M3}, std::pair{&int8, CUDA_R_8I}}) {
    for (const LtConfig& config : *configs) {
      EXPECT_TRUE(seen.insert(config.describe()).second) << config.describe();
      EXPECT_EQ(config.ab_type, operand) << config.describe();
      EXPECT_TRUE(config.a_transposed && !config.b_transposed) << config.describe();
      EXPECT_TRUE(!config.in_place || config.c_type == config.d_type) << config.describe();
      // A D scale and amax exist only for an fp8 D.
      EXPECT_EQ(config.d_scale, config.d_type == CUDA_R_8F_E4M3) << config.describe();
    }
  }
  bool fp8_out = false, fast_accum = false;
  for (const LtConfig& config : fp8) {
    EXPECT_EQ(config.compute, CUBLAS_COMPUTE_32F) << config.describe();
    fp8_out = fp8_out || config.d_type == CUDA_R_8F_E4M3;
    fast_accum = fast_accum || config.fast_accum == int8_t{1};
  }
  EXPECT_TRUE(fp8_out);
  EXPECT_TRUE(fast_accum);
}
#endif

// A cache from before the read rate was measured is measured again: its floors, at the copy rate alone,
// sat above kernels that read much more than they write (an honest MoE sum at 96% of such a floor).
TEST(Ceilings, ACacheWithoutTheReadRateIsMeasuredAgain) {
  fs::path dir = fs::path(testing::TempDir()) / ("d2k-ceilings-noread-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path file = ceilings_file(Device::cpu, dir);
  nlohmann::json old = {{"device_name", "cpu"},  {"device_id", device_id(Device::cpu)}, {"copy_gbps", 12345.5},
                        {"fp8_config", ""},      {"int8_config", ""},
                        {"measured_at", "2026-12-01T03:00:00Z"}};
  std::ofstream(file) << old.dump();
  const Ceilings measured = cached_ceilings(Device::cpu, dir, false, nullptr);
  EXPECT_LT(measured.copy_gbps, 2000.0);
  EXPECT_GT(measured.read_gbps, 0.1);
  EXPECT_NE(measured.measured_at, "2026-12-01T03:00:00Z");
  fs::remove_all(dir);
}
