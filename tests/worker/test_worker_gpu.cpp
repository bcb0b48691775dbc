// The d2k-worker executable end to end on the cuda device (label gpu): CUDA solutions from
// solutions/, built with nvcc through the builder.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "harness.hpp"
#include "timing/stats.hpp"

using namespace d2k;
using namespace d2k::test;

namespace {

[[maybe_unused]] testing::Environment* const kCleanup =
    testing::AddGlobalTestEnvironment(new RemoveScratchIfAllPassed);

class WorkerGpu : public testing::Test {
 protected:
  void SetUp() override { dir_ = test_dir(); }

  // y = x + alpha * z on 64x1000 f32: x with a padded row stride, z column-major, y contiguous.
  WorkerRequest axpy_request(const fs::path& library) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    x_.resize(63 * 1024 + 1000);
    z_.resize(64 * 1000);
    for (float& v : x_) v = normal(random_);
    for (float& v : z_) v = normal(random_);
    write_raw(dir_ / "x.bin", x_);
    write_raw(dir_ / "z.bin", z_);
    WorkerRequest request;
    request.library = library.string();
    request.device = Device::cuda;
    request.inputs = {tensor("x", DType::f32, {64, 1000}, {1024, 1}, "x.bin"),
                      tensor("z", DType::f32, {64, 1000}, {1, 64}, "z.bin")};
    request.outputs = {tensor("y", DType::f32, {64, 1000}, {1000, 1}, "y.bin")};
    request.scalars = {WireScalar{"alpha", false, -1.5}};
    request.time = false;
    return request;
  }

  fs::path dir_;
  std::mt19937 random_{7};
  std::vector<float> x_, z_;
};

}  // namespace

TEST_F(WorkerGpu, RunsACorrectCudaSolutionAndTimesIt) {
  WorkerRequest request = axpy_request(built("axpy_cuda.cu", Device::cuda));
  request.time = true;
  request.timing.min_samples = 20;
  request.timing.max_samples = 20;
  WorkerRun done = run_worker(dir_, request);
  ASSERT_TRUE(done.process.ok()) << done.process.describe() << "\n" << done.process.output;
  ASSERT_TRUE(done.result);
  EXPECT_EQ(done.result->status, "ok") << done.result->phase << ": " << done.result->message;
  EXPECT_TRUE(done.result->guard_violations.empty());
  ASSERT_EQ(done.result->samples_ms.size(), 20u);
  TimingSummary summary = summarize(done.result->samples_ms);
  std::cout << done.result->device_name << ": axpy median " << summary.median_ms * 1e3 << " us\n";
  EXPECT_GT(summary.median_ms, 0.0);
  EXPECT_LT(summary.median_ms, 5.0);

  std::vector<float> y = read_raw<float>(dir_ / "y.bin");
  ASSERT_EQ(y.size(), 64000u);
  int wrong = 0;
  for (int i = 0; i < 64; ++i) {
    for (int j = 0; j < 1000; ++j) {
      float want = x_[i * 1024 + j] + -1.5f * z_[i + 64 * j];
      wrong += std::abs(y[i * 1000 + j] - want) > 1e-6f * (1 + std::abs(want));
    }
  }
  EXPECT_EQ(wrong, 0);
}

TEST_F(WorkerGpu, AnIllegalAddressIsARuntimeErrorWithTheCudaErrorName) {
  WorkerRun done = run_worker(dir_, axpy_request(built("illegal_address_cuda.cu", Device::cuda)));
  EXPECT_TRUE(done.process.ok()) << done.process.describe() << "\n" << done.process.output;
  ASSERT_TRUE(done.result);
  EXPECT_EQ(done.result->status, "runtime_error");
  EXPECT_EQ(done.result->phase, "run");
  EXPECT_NE(done.result->message.find("cudaError"), std::string::npos) << done.result->message;
  std::cout << "message: " << done.result->message << "\n";
}

TEST_F(WorkerGpu, WritesPastTheOutputInGpuMemoryAreSeen) {
  WorkerRun done = run_worker(dir_, axpy_request(built("writes_past_output_cuda.cu", Device::cuda)));
  ASSERT_TRUE(done.result) << done.process.output;
  EXPECT_EQ(done.result->status, "ok") << done.result->message;
  ASSERT_EQ(done.result->guard_violations.size(), 1u);
  EXPECT_EQ(done.result->guard_violations[0].tensor, "y");
  EXPECT_EQ(done.result->guard_violations[0].side, "after");
  EXPECT_GT(done.result->guard_violations[0].bytes, 32);
}

TEST_F(WorkerGpu, WorkHiddenOnAnotherStreamIsTimed) {
  std::vector<float> x(1 << 22);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(random_);
  write_raw(dir_ / "x.bin", x);
  WorkerRequest request;
  request.library = built("hides_work_cuda.cu", Device::cuda).string();
  request.device = Device::cuda;
  request.inputs = {tensor("x", DType::f32, {1 << 22}, {1}, "x.bin")};
  request.outputs = {tensor("y", DType::f32, {1 << 22}, {1}, "y.bin")};
  request.timing.min_samples = 10;
  request.timing.max_samples = 10;
  WorkerRun done = run_worker(dir_, request);
  ASSERT_TRUE(done.result) << done.process.output;
  EXPECT_EQ(done.result->status, "ok") << done.result->message;
  EXPECT_EQ(read_raw<float>(dir_ / "y.bin"), x);
  TimingSummary summary = summarize(done.result->samples_ms);
  std::cout << "hidden work: median " << summary.median_ms << " ms\n";
  // 400 passes over 32 MiB: far above the few microseconds the call's own stream shows.
  EXPECT_GT(summary.median_ms, 0.2);
}
