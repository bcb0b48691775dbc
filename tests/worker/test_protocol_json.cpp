#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/json.hpp"

using namespace d2k;
using nlohmann::json;

TEST(ProtocolJson, RequestRoundTrips) {
  WorkerRequest request;
  request.library = "/cache/abc/solution.so";
  request.device = Device::cuda;
  WireTensor x{"x", DType::bf16, {3, 5}, {8, 1}, "x.bin", false};
  WireTensor y{"x", DType::bf16, {3, 5}, {8, 1}, "x.out", true};
  request.inputs = {x};
  request.outputs = {y};
  request.scalars = {WireScalar{"eps", false, 1e-6}, WireScalar{"k", true, 8}};
  request.time = false;
  request.timing.warmup = 7;
  request.timing.max_seconds = 2.5;
  request.timing.flush_l2 = false;
  request.timing.rotate_cache_multiple = 2.5;
  request.timing.rotate_max_sets = 9;
  request.timing.rotate_max_bytes = int64_t{5} << 30;
  request.deterministic = false;

  json j = request;
  EXPECT_EQ(j["device"], "cuda");
  EXPECT_EQ(j["inputs"][0]["dtype"], "bf16");
  WorkerRequest back = j.get<WorkerRequest>();
  EXPECT_EQ(json(back), j);
  EXPECT_EQ(back.device, Device::cuda);
  EXPECT_EQ(back.outputs[0].inplace, true);
  EXPECT_EQ(back.inputs[0].strides, (std::vector<int64_t>{8, 1}));
  EXPECT_EQ(back.timing.warmup, 7);
  EXPECT_FALSE(back.timing.flush_l2);
  EXPECT_EQ(back.timing.rotate_max_sets, 9);
  EXPECT_EQ(back.timing.rotate_max_bytes, int64_t{5} << 30);
  EXPECT_FALSE(back.deterministic);
}

TEST(ProtocolJson, ResultRoundTrips) {
  WorkerResult result;
  result.status = "runtime_error";
  result.phase = "timing";
  result.message = "cudaErrorIllegalAddress: an illegal memory access was encountered";
  result.guard_violations = {GuardViolation{"y", "after", 12}};
  result.samples_ms = {0.125, 0.25};
  result.device_name = "NVIDIA H200";
  result.rotation_sets = 3;
  result.rotation_bytes = 267386880;
  result.timed_check = TimedCallCheck{24, 1, 3, 2, "q", 16, {"'x' of copy 2"}};
  GpuClocks clocks;
  clocks.available = true;
  clocks.after.sm_mhz = 1410;
  clocks.after.throttle_reasons = 0x4;
  clocks.reasons = {"sw_power_cap"};
  clocks.throttled = true;
  clocks.warning = "throttled";
  result.clocks = clocks;
  result.phases = {{"setup", 0.25}, {"timing", 1.5}};
  result.token = "0123456789abcdef0123456789abcdef";
  json j = result;
  WorkerResult back = j.get<WorkerResult>();
  EXPECT_EQ(json(back), j);
  EXPECT_EQ(back.guard_violations[0].bytes, 12);
  EXPECT_EQ(back.timed_check.first_output, "q");
  EXPECT_EQ(back.timed_check.modified_inputs, std::vector<std::string>{"'x' of copy 2"});
  ASSERT_TRUE(back.clocks);
  EXPECT_EQ(back.clocks->after.throttle_reasons, 0x4u);
  EXPECT_EQ(back.phases[1].name, "timing");
  EXPECT_EQ(back.token, "0123456789abcdef0123456789abcdef");

  // A result without the newer fields (an older worker) still reads, with their defaults.
  j.erase("clocks");
  j.erase("timed_check");
  j.erase("phases");
  back = j.get<WorkerResult>();
  EXPECT_FALSE(back.clocks);
  EXPECT_EQ(back.timed_check.mismatched_calls, 0);
  EXPECT_TRUE(back.phases.empty());
}

TEST(ProtocolJson, OmittedStridesAreRowMajorAndDefaultsApply) {
  json j = json::parse(R"({"library": "s.so", "device": "cpu",
                           "inputs": [{"name": "a", "dtype": "f32", "shape": [2, 3, 4], "file": "a.bin"}]})");
  WorkerRequest request = j.get<WorkerRequest>();
  EXPECT_EQ(request.inputs[0].strides, (std::vector<int64_t>{12, 4, 1}));
  EXPECT_TRUE(request.time);
  EXPECT_EQ(request.timing.max_samples, TimingConfig{}.max_samples);
}

TEST(ProtocolJson, ErrorsNameTheFieldAndTheValue) {
  json j = json::parse(R"({"library": "s.so", "device": "cpu",
                           "inputs": [{"name": "a", "dtype": "bf17", "shape": [2], "file": "a.bin"}]})");
  try {
    j.get<WorkerRequest>();
    FAIL() << "parsed";
  } catch (const Error& error) {
    std::string what = error.what();
    EXPECT_NE(what.find("dtype"), std::string::npos) << what;
    EXPECT_NE(what.find("bf17"), std::string::npos) << what;
  }
  json no_device = json::parse(R"({"library": "s.so"})");
  try {
    no_device.get<WorkerRequest>();
    FAIL() << "parsed";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("device"), std::string::npos) << error.what();
  }
}
