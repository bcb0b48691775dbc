#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/json.hpp"
#include "timing/ceilings.hpp"
#include "timing/device_info.hpp"

namespace fs = std::filesystem;
using namespace d2k;

TEST(Ceilings, CpuCopyIsMeasuredAndCached) {
  fs::path dir = fs::path(testing::TempDir()) / ("d2k-ceilings-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  Ceilings first = cached_ceilings(Device::cpu, dir, false, nullptr);
  EXPECT_GT(first.copy_gbps, 0.1);
  EXPECT_LT(first.copy_gbps, 2000.0);
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
  edited.bf16_tflops = 7.25;
  edited.fp8_tflops = 14.5;
  edited.int8_tops = 13.75;
  std::ofstream(file) << nlohmann::json(edited).dump();
  Ceilings second = cached_ceilings(Device::cpu, dir, false, nullptr);
  EXPECT_DOUBLE_EQ(second.copy_gbps, 12345.5);
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
  ASSERT_TRUE(read.bf16_tflops.has_value());
  EXPECT_DOUBLE_EQ(*read.bf16_tflops, 773.0);
  EXPECT_FALSE(read.fp8_tflops.has_value());
  EXPECT_FALSE(read.int8_tops.has_value());
}
