// The d2k-worker executable end to end on the cuda device (label gpu): CUDA solutions from
// solutions/, built with nvcc through the builder.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "harness.hpp"
#include "timing/rotation.hpp"
#include "timing/stats.hpp"

using namespace d2k;
using namespace d2k::test;

namespace {

[[maybe_unused]] testing::Environment* const kCleanup =
    testing::AddGlobalTestEnvironment(new RemoveScratchIfAllPassed);

class WorkerGpu : public testing::Test {
 protected:
  // y = x + alpha * z on 64x1000 f32: x with a padded row stride, z column-major, y contiguous.
  WorkerRequest axpy_request(const fs::path& library) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    x_.resize(63 * 1024 + 1000);
    z_.resize(64 * 1000);
    for (float& v : x_) v = normal(random_);
    for (float& v : z_) v = normal(random_);
    WorkerRequest request;
    request.library = library.string();
    request.device = Device::cuda;
    request.inputs = {tensor("x", DType::f32, {64, 1000}, {1024, 1}), tensor("z", DType::f32, {64, 1000}, {1, 64})};
    request.inputs[0].perturb = request.inputs[1].perturb = true;
    request.outputs = {tensor("y", DType::f32, {64, 1000}, {1000, 1})};
    request.scalars = {WireScalar{"alpha", false, -1.5}};
    request.time = false;
    return request;
  }
  std::vector<std::string> axpy_draw() const { return {bytes_of(x_), bytes_of(z_)}; }

  std::mt19937 random_{7};
  std::vector<float> x_, z_;
};

}  // namespace

TEST_F(WorkerGpu, RunsACorrectCudaSolutionAndTimesIt) {
  WorkerRequest request = axpy_request(built("axpy_cuda.cu", Device::cuda));
  request.time = true;
  request.timing.min_samples = 20;
  request.timing.max_samples = 20;
  const WorkerOutcome done = run_worker(request, axpy_draw());
  ASSERT_TRUE(done.process.ok()) << done.process.describe() << "\n" << done.process.output;
  ASSERT_FALSE(done.forged) << *done.forged;
  EXPECT_FALSE(done.report.failure) << done.report.failure->message;
  EXPECT_TRUE(done.report.guard_violations.empty());
  ASSERT_TRUE(done.report.timing);
  ASSERT_EQ(done.report.timing->samples_ms.size(), 20u);
  TimingSummary summary = summarize(done.report.timing->samples_ms);
  std::cout << done.report.device_name << ": axpy median " << summary.median_ms * 1e3 << " us; outside clock: "
            << *done.report.noop_seconds * 1e3 / done.report.timing->noop_samples << " ms per call with nothing called, "
            << *done.report.timed_seconds * 1e3 / 20 << " ms per timed call\n";
  EXPECT_GT(summary.median_ms, 0.0);
  EXPECT_LT(summary.median_ms, 5.0);

  std::vector<float> y = values_of<float>((*done.report.checked)[0]);
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
  // The request first: it draws x_ and z_, which axpy_draw reads (the order of arguments is unspecified).
  const WorkerRequest request = axpy_request(built("illegal_address_cuda.cu", Device::cuda));
  const WorkerOutcome done = run_worker(request, axpy_draw());
  EXPECT_TRUE(done.process.ok()) << done.process.describe() << "\n" << done.process.output;
  ASSERT_TRUE(done.report.failure);
  EXPECT_EQ(done.report.failure->status, WorkerStatus::runtime_error);
  EXPECT_EQ(done.report.failure->stage, Stage::run);
  EXPECT_NE(done.report.failure->message.find("cudaError"), std::string::npos) << done.report.failure->message;
  std::cout << "message: " << done.report.failure->message << "\n";
}

TEST_F(WorkerGpu, WritesPastTheOutputInGpuMemoryAreSeen) {
  // The request first: it draws x_ and z_, which axpy_draw reads (the order of arguments is unspecified).
  const WorkerRequest request = axpy_request(built("writes_past_output_cuda.cu", Device::cuda));
  const WorkerOutcome done = run_worker(request, axpy_draw());
  ASSERT_TRUE(done.report.ended) << done.process.output;
  EXPECT_FALSE(done.report.failure);
  ASSERT_EQ(done.report.guard_violations.size(), 1u);
  EXPECT_EQ(done.report.guard_violations[0].tensor, "y");
  EXPECT_EQ(done.report.guard_violations[0].side, "after");
  EXPECT_GT(done.report.guard_violations[0].bytes, 32);
}

TEST_F(WorkerGpu, WorkHiddenOnAnotherStreamIsTimed) {
  std::vector<float> x(1 << 22);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(random_);
  WorkerRequest request;
  request.library = built("hides_work_cuda.cu", Device::cuda).string();
  request.device = Device::cuda;
  request.inputs = {tensor("x", DType::f32, {1 << 22}, {1})};
  request.outputs = {tensor("y", DType::f32, {1 << 22}, {1})};
  request.timing.min_samples = 10;
  request.timing.max_samples = 10;
  const WorkerOutcome done = run_worker(request, {bytes_of(x)});
  ASSERT_TRUE(done.report.timing) << done.process.output;
  EXPECT_FALSE(done.report.failure);
  EXPECT_EQ(values_of<float>((*done.report.checked)[0]), x);
  TimingSummary summary = summarize(done.report.timing->samples_ms);
  std::cout << "hidden work: median " << summary.median_ms << " ms\n";
  // 400 passes over 32 MiB: far above the few microseconds the call's own stream shows.
  EXPECT_GT(summary.median_ms, 0.2);
}

namespace {

// y = x on `floats` f32 values; returns the worker's outcome.
WorkerOutcome time_copy(const fs::path& library, int64_t floats, double cache_multiple) {
  std::vector<float> x(static_cast<std::size_t>(floats));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 8191) * 0.25f;
  WorkerRequest request;
  request.library = library.string();
  request.device = Device::cuda;
  request.inputs = {tensor("x", DType::f32, {floats}, {1})};
  request.inputs[0].perturb = true;
  request.outputs = {tensor("y", DType::f32, {floats}, {1})};
  request.timing.warmup = 3;
  request.timing.min_samples = 50;
  request.timing.max_samples = 200;
  request.timing.max_seconds = 2.0;
  request.timing.target_ci = 0.005;
  request.timing.rotate_cache_multiple = cache_multiple;
  return run_worker(request, {bytes_of(x)}, {}, 300);
}

}  // namespace

// A 24 MB input and its 24 MB output fit in the H200's 60 MB L2. Cold and rotated, their copy must cost
// per byte about what a copy far larger than any L2 costs (a smaller copy pays more per byte for the
// launch and the ramp, so it may be slower, never clearly faster): nothing of the input is served by L2.
TEST_F(WorkerGpu, RotationKeepsAnInputOfAboutTheL2SizeOutOfIt) {
  const fs::path library = built("copy_cuda.cu", Device::cuda);
  const std::size_t l2 = last_level_cache_bytes(Device::cuda);
  auto per_byte = [&](int64_t floats, double multiple, WorkerOutcome& done) {
    done = time_copy(library, floats, multiple);
    EXPECT_TRUE(done.report.timing) << done.process.output;
    if (!done.report.timing) return 0.0;
    EXPECT_FALSE(done.report.failure);
    return summarize(done.report.timing->samples_ms).median_ms / (2.0 * 4.0 * static_cast<double>(floats));
  };
  WorkerOutcome small, flushed, large;
  const double small_ns = per_byte(int64_t{6} << 20, 3.0, small) * 1e6;
  const double flushed_ns = per_byte(int64_t{6} << 20, 0.0, flushed) * 1e6;
  const double large_ns = per_byte(int64_t{128} << 20, 3.0, large) * 1e6;
  ASSERT_TRUE(small.report.timing && flushed.report.timing && large.report.timing);
  std::cout << "L2 " << (l2 >> 20) << " MiB; ns per byte moved: 24 MB rotated over " << small.report.timing->rotation_sets
            << " copies " << small_ns << ", 24 MB flushed only " << flushed_ns << ", 512 MB rotated over "
            << large.report.timing->rotation_sets << " copies " << large_ns << "\n";
  EXPECT_GE(static_cast<double>(small.report.timing->rotation_bytes), 3.0 * static_cast<double>(l2));
  EXPECT_EQ(flushed.report.timing->rotation_sets, 1);
  EXPECT_EQ(large.report.timing->rotation_sets, 2);
  EXPECT_GE(small_ns, 0.9 * large_ns) << "the rotated 24 MB copy is served from L2";
}

TEST_F(WorkerGpu, TheResultCarriesTheGpuClocks) {
  WorkerRequest request = axpy_request(built("axpy_cuda.cu", Device::cuda));
  request.time = true;
  request.timing.min_samples = 20;
  request.timing.max_samples = 20;
  const WorkerOutcome done = run_worker(request, axpy_draw());
  ASSERT_TRUE(done.report.timing) << done.process.output;
  ASSERT_TRUE(done.report.timing->clocks);
  const GpuClocks& clocks = *done.report.timing->clocks;
  ASSERT_TRUE(clocks.available) << clocks.unavailable;
  for (const ClockReading* r : {&clocks.before, &clocks.after}) {
    EXPECT_GT(r->sm_mhz, 0u);
    EXPECT_GT(r->sm_max_mhz, 500u);
    EXPECT_LE(r->sm_mhz, r->sm_max_mhz);
    EXPECT_GT(r->memory_mhz, 0u);
    EXPECT_GT(r->temperature_c, 0u);
    EXPECT_LT(r->temperature_c, 110u);
    EXPECT_GT(r->power_w, 10.0);
  }
  std::cout << "SM " << clocks.after.sm_mhz << "/" << clocks.after.sm_max_mhz << " MHz (application "
            << clocks.after.sm_application_mhz << "), memory " << clocks.after.memory_mhz << " MHz, "
            << clocks.after.temperature_c << " C, " << clocks.after.power_w << " W"
            << (clocks.throttled ? "; " + clocks.warning : std::string()) << "\n";
  EXPECT_EQ(done.report.timing->calls, 3 + 20 + kVerificationCalls) << "warm-up, timed and verification calls are all counted";
}
