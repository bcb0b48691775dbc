// Runs on a GPU machine only (label gpu): the measured ceilings of an H100/H200-class GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "timing/ceilings.hpp"
#include "timing/cuda_util.hpp"
#include "timing/device_info.hpp"
#include "timing/timer.hpp"

#ifdef D2K_WITH_CUDA

namespace fs = std::filesystem;
using namespace d2k;

// The H200's dense datasheet rates are 989 (bf16) and 1979 (fp8, int8) per second in 1e12; cuBLAS
// measured 773 bf16 there. The bands admit what a power-limited part reaches and reject a rate that is
// off by a factor (a wrong FLOP count, a sparse or misconfigured kernel).
TEST(CeilingsGpu, CopyReadAndMatrixRatesArePlausible) {
  Ceilings ceilings = measure_ceilings(Device::cuda);
  std::cout << ceilings.device_name << " (" << ceilings.device_id << "): copy " << ceilings.copy_gbps
            << " GB/s, read " << ceilings.read_gbps << " GB/s, bf16 " << ceilings.bf16_tflops.value_or(0) << " TFLOP/s, fp8 "
            << ceilings.fp8_tflops.value_or(0) << " TFLOP/s, int8 " << ceilings.int8_tops.value_or(0) << " TOPS\n"
            << "fp8 as " << ceilings.fp8_config << "; int8 as " << ceilings.int8_config << "\n";
  EXPECT_GT(ceilings.copy_gbps, 1000.0);
  EXPECT_LT(ceilings.copy_gbps, 10000.0);
  // A read of the same memory is at least nearly as fast as a copy (one direction on the bus), and
  // under the H200's datasheet 4.8 TB/s by no more than measurement noise.
  EXPECT_GT(ceilings.read_gbps, 0.9 * ceilings.copy_gbps);
  EXPECT_LT(ceilings.read_gbps, 10000.0);
  // The memory's bound (peak clock x 2 x bus width) is read off the device, and every measured rate sits
  // under it (an H200: 4814 GB/s, read 93% of it).
  ASSERT_TRUE(ceilings.memory_bound_gbps().has_value());
  std::cout << "memory bound " << *ceilings.memory_bound_gbps() << " GB/s (" << ceilings.memory_bus_bits << "-bit bus at "
            << ceilings.memory_max_mhz << " MHz)\n";
  EXPECT_LT(ceilings.read_gbps, *ceilings.memory_bound_gbps());
  EXPECT_GT(ceilings.read_gbps, 0.7 * *ceilings.memory_bound_gbps());
  ASSERT_TRUE(ceilings.bf16_tflops.has_value());
  EXPECT_GT(*ceilings.bf16_tflops, 100.0);
  EXPECT_LT(*ceilings.bf16_tflops, 2000.0);
  ASSERT_TRUE(ceilings.fp8_tflops.has_value());
  ASSERT_TRUE(ceilings.int8_tops.has_value());
  EXPECT_FALSE(ceilings.fp8_config.empty());
  EXPECT_FALSE(ceilings.int8_config.empty());
  if (ceilings.device_name.find("H200") != std::string::npos || ceilings.device_name.find("H100") != std::string::npos) {
    EXPECT_GE(*ceilings.bf16_tflops, 600.0);
    EXPECT_LE(*ceilings.bf16_tflops, 1000.0);
    EXPECT_GE(*ceilings.fp8_tflops, 1200.0);
    EXPECT_LE(*ceilings.fp8_tflops, 2000.0);
    EXPECT_GE(*ceilings.int8_tops, 1200.0);
    EXPECT_LE(*ceilings.int8_tops, 2000.0);
  }
  // One-byte operands go at least 1.4x as fast as bf16 on any tensor-core GPU that has them.
  EXPECT_GT(*ceilings.fp8_tflops, 1.4 * *ceilings.bf16_tflops);
  EXPECT_TRUE(ceilings.device_id.starts_with("GPU-")) << ceilings.device_id;
}

TEST(CeilingsGpu, CacheFileIsKeyedByTheGpu) {
  fs::path dir = fs::path(testing::TempDir()) / ("d2k-ceilings-gpu-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  Ceilings first = cached_ceilings(Device::cuda, dir, false, &std::cout);
  EXPECT_TRUE(fs::exists(ceilings_file(Device::cuda, dir)));
  Ceilings second = cached_ceilings(Device::cuda, dir, false, nullptr);
  EXPECT_EQ(second.measured_at, first.measured_at);
  EXPECT_DOUBLE_EQ(second.copy_gbps, first.copy_gbps);
  fs::remove_all(dir);
}

// Work hidden on another stream must be paid for, although the events on the call's stream miss it.
TEST(TimerGpu, WorkHiddenOnAnotherStreamIsCharged) {
  CudaStream stream, hidden;
  const std::size_t bytes = std::size_t{4} << 30;  // ~2 ms of memset at ~2 TB/s of writes
  DeviceBuffer buffer(bytes);
  TimingConfig config;
  config.warmup = 1;
  config.min_samples = 5;
  config.max_samples = 5;

  auto honest = [&] { check_cuda(cudaMemsetAsync(buffer.get(), 1, bytes, stream.get()), "memset"); };
  auto cheat = [&] { check_cuda(cudaMemsetAsync(buffer.get(), 2, bytes, hidden.get()), "memset"); };
  std::vector<double> honest_ms = measure(Device::cuda, honest, stream.get(), config);
  std::vector<double> cheat_ms = measure(Device::cuda, cheat, stream.get(), config);
  ASSERT_EQ(honest_ms.size(), 5u);
  ASSERT_EQ(cheat_ms.size(), 5u);
  std::sort(honest_ms.begin(), honest_ms.end());
  std::sort(cheat_ms.begin(), cheat_ms.end());
  std::cout << "honest median " << honest_ms[2] << " ms, hidden median " << cheat_ms[2] << " ms\n";
  EXPECT_GT(honest_ms[2], 0.3);
  EXPECT_GT(cheat_ms[2], 0.5 * honest_ms[2]);
}

#endif  // D2K_WITH_CUDA
