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
}

TEST(ProtocolJson, ResultRoundTrips) {
  WorkerResult result;
  result.status = "runtime_error";
  result.phase = "timing";
  result.message = "cudaErrorIllegalAddress: an illegal memory access was encountered";
  result.guard_violations = {GuardViolation{"y", "after", 12}};
  result.samples_ms = {0.125, 0.25};
  result.device_name = "NVIDIA H200";
  json j = result;
  WorkerResult back = j.get<WorkerResult>();
  EXPECT_EQ(json(back), j);
  EXPECT_EQ(back.guard_violations[0].bytes, 12);
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
