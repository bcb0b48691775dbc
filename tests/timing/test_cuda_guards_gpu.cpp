// Runs on a GPU machine only (label gpu): each state a call can leave behind (timing/cuda_guards.hpp)
// is reported by call_left_state, and a clean call is not. Every test leaves the device as it found it.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#ifdef D2K_WITH_CUDA
#include "timing/cuda_guards.hpp"
#include "timing/cuda_util.hpp"

using namespace d2k;

namespace {

class CudaGuardsGpu : public testing::Test {
 protected:
  void SetUp() override {
    check_cuda(cudaFree(nullptr), "creating the context");
    pin_no_l2_persistence();
    buffer_ = std::make_unique<DeviceBuffer>(std::size_t{1} << 20);
  }
  void TearDown() override {
    cudaGetLastError();
    pin_no_l2_persistence();
  }
  // A call that leaves nothing behind: some work on the call's stream, then its synchronization.
  void clean_call() {
    check_cuda(cudaMemsetAsync(buffer_->get(), 1, buffer_->bytes(), stream_.get()), "cudaMemsetAsync");
    check_cuda(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize");
  }
  bool persisting_l2_supported() {
    int bytes = 0;
    check_cuda(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxPersistingL2CacheSize, 0), "cudaDeviceGetAttribute");
    return bytes > 0;
  }

  CudaStream stream_;
  std::unique_ptr<DeviceBuffer> buffer_;
};

void expect_reported(const std::optional<std::string>& state, const std::string& words) {
  ASSERT_TRUE(state.has_value()) << "nothing reported; expected: " << words;
  EXPECT_NE(state->find(words), std::string::npos) << *state;
}

}  // namespace

TEST_F(CudaGuardsGpu, ACleanCallLeavesNothing) {
  clean_call();
  EXPECT_EQ(call_left_state(stream_.get()), std::nullopt);
  reset_persisting_l2();
  clean_call();
  EXPECT_EQ(call_left_state(stream_.get()), std::nullopt);
}

TEST_F(CudaGuardsGpu, ReportsAPersistingL2Limit) {
  if (!persisting_l2_supported()) GTEST_SKIP() << "this GPU has no persisting L2";
  clean_call();
  check_cuda(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, std::size_t{4} << 20), "cudaDeviceSetLimit");
  expect_reported(call_left_state(stream_.get()), "persisting-L2 limit");
  pin_no_l2_persistence();
  EXPECT_EQ(call_left_state(stream_.get()), std::nullopt);
}

TEST_F(CudaGuardsGpu, ReportsAnAccessPolicyWindow) {
  if (!persisting_l2_supported()) GTEST_SKIP() << "this GPU has no persisting L2";
  cudaStreamAttrValue value{};
  value.accessPolicyWindow.base_ptr = buffer_->get();
  value.accessPolicyWindow.num_bytes = buffer_->bytes();
  value.accessPolicyWindow.hitRatio = 1.0f;
  value.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  value.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  check_cuda(cudaStreamSetAttribute(stream_.get(), cudaStreamAttributeAccessPolicyWindow, &value),
             "cudaStreamSetAttribute");
  clean_call();
  expect_reported(call_left_state(stream_.get()), "access policy window");
  value.accessPolicyWindow.num_bytes = 0;
  check_cuda(cudaStreamSetAttribute(stream_.get(), cudaStreamAttributeAccessPolicyWindow, &value),
             "cudaStreamSetAttribute");
  EXPECT_EQ(call_left_state(stream_.get()), std::nullopt);
}

TEST_F(CudaGuardsGpu, ReportsTheCallsStreamStillCapturing) {
  check_cuda(cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
  check_cuda(cudaMemsetAsync(buffer_->get(), 2, buffer_->bytes(), stream_.get()), "cudaMemsetAsync (captured)");
  expect_reported(call_left_state(stream_.get()), "the call's stream is still capturing");
  cudaGraph_t graph = nullptr;
  check_cuda(cudaStreamEndCapture(stream_.get(), &graph), "cudaStreamEndCapture");
  cudaGraphDestroy(graph);
  EXPECT_EQ(call_left_state(stream_.get()), std::nullopt);
}

TEST_F(CudaGuardsGpu, ReportsABlockingStreamOfItsOwnCapturing) {
  // A stream the harness does not know, blocking (it synchronizes with the legacy stream): its capture
  // shows through the legacy stream.
  cudaStream_t own = nullptr;
  check_cuda(cudaStreamCreate(&own), "cudaStreamCreate");
  check_cuda(cudaStreamBeginCapture(own, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
  clean_call();
  expect_reported(call_left_state(stream_.get()), "a blocking stream is still capturing");
  cudaGraph_t graph = nullptr;
  check_cuda(cudaStreamEndCapture(own, &graph), "cudaStreamEndCapture");
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaStreamDestroy(own);
  EXPECT_EQ(call_left_state(stream_.get()), std::nullopt);
}

TEST_F(CudaGuardsGpu, ReportsAGlobalCaptureOfItsOwn) {
  // In global mode the capture also makes the harness's own unsafe calls fail: something is reported
  // whichever of its queries the driver refuses.
  cudaStream_t own = nullptr;
  check_cuda(cudaStreamCreate(&own), "cudaStreamCreate");
  check_cuda(cudaStreamBeginCapture(own, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  const auto state = call_left_state(stream_.get());
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(own, &graph);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaStreamDestroy(own);
  cudaGetLastError();
  ASSERT_TRUE(state.has_value());
  EXPECT_NE(state->find("capturing"), std::string::npos) << *state;
}

TEST_F(CudaGuardsGpu, ReportsAPendingError) {
  clean_call();
  void* huge = nullptr;
  ASSERT_NE(cudaMalloc(&huge, std::size_t{1} << 60), cudaSuccess);  // leaves cudaErrorMemoryAllocation pending
  const auto state = call_left_state(stream_.get());
  expect_reported(state, "a CUDA error is pending");
  EXPECT_NE(state->find("cudaErrorMemoryAllocation"), std::string::npos) << *state;
  // Reported, not cleared: the worker's own error path still sees it.
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(call_left_state(stream_.get()), std::nullopt);
}

TEST_F(CudaGuardsGpu, PinningAndResettingLeaveNoErrorBehind) {
  pin_no_l2_persistence();
  reset_persisting_l2();
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  EXPECT_EQ(call_left_state(stream_.get()), std::nullopt);
}

#endif
