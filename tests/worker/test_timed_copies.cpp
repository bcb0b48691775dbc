#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "core/error.hpp"
#include "worker/timed_copies.hpp"

namespace d2k {
namespace {

// One f32 input and one f32 output of 16 elements on the cpu device; each call "computes" by writing its
// index into the output, so a kept call's outputs say which call they came from.
struct Fixture {
  WorkerRequest request;
  std::unique_ptr<GuardedBuffer> input, output;
  std::unique_ptr<TimedCopies> copies;

  explicit Fixture(int sampled_calls) {
    request.device = Device::cpu;
    request.inputs = {WireTensor{.name = "x", .dtype = DType::f32, .shape = {16}, .strides = {1}}};
    request.outputs = {WireTensor{.name = "y", .dtype = DType::f32, .shape = {16}, .strides = {1}}};
    request.sampled_calls = sampled_calls;
    request.sample_seed = 7;
    input = std::make_unique<GuardedBuffer>(Device::cpu, "x", 64, 1);
    output = std::make_unique<GuardedBuffer>(Device::cpu, "y", 64, 2);
    CallTensors copy0;
    copy0.inputs = {input.get()};
    copy0.outputs = {output.get()};
    for (auto* buffer : {input.get(), output.get()}) {
      d2k_tensor t{};
      t.data = buffer->data();
      t.dtype = D2K_FLOAT32;
      t.rank = 1;
      t.shape[0] = 16;
      t.strides[0] = 1;
      (buffer == input.get() ? copy0.input_tensors : copy0.output_tensors).push_back(t);
    }
    copies = std::make_unique<TimedCopies>(request, copy0, 3);
    const std::string zeros(64, '\0');
    copies->fill({zeros});
  }

  void call(int64_t index, bool always = false) {
    d2k_call call{};
    copies->before_call(call);
    const float value = static_cast<float>(index);
    for (int e = 0; e < 16; ++e) std::memcpy(static_cast<char*>(call.outputs[0].data) + 4 * e, &value, 4);
    copies->after_call(always);
  }
};

float first_element(const GuardedBuffer* buffer) {
  float value;
  std::memcpy(&value, buffer->data(), 4);
  return value;
}

TEST(TimedCopies, ACallKeptAlwaysComesBackWhateverTheSamplingDraws) {
  Fixture f(1);
  f.call(0, /*always=*/true);
  for (int64_t i = 1; i < 500; ++i) f.call(i);
  const auto kept = f.copies->kept();
  ASSERT_GE(kept.size(), 2u);
  EXPECT_EQ(kept.front().call, 0);
  EXPECT_EQ(first_element(kept.front().outputs[0]), 0.0f) << "the kept-always call's own outputs";
  EXPECT_EQ(kept.back().call, 499);
  EXPECT_EQ(first_element(kept.back().outputs[0]), 499.0f);
}

TEST(TimedCopies, OnlyOneCallIsKeptAlwaysPerFill) {
  Fixture f(1);
  f.call(0, true);
  EXPECT_THROW(f.call(1, true), Error);
}

}  // namespace
}  // namespace d2k
