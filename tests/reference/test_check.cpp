#include "reference/check.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <limits>

namespace d2k {
namespace {

// y = 2 * x, x float32, y bfloat16.
class Double : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars&) const override {
    const auto& x = inputs.at("x");
    return {{"y", (2.0 * x).to(x.scalar_type() == at::kDouble ? at::kDouble : at::kBFloat16)}};
  }
};

Task double_task() {
  Task task;
  task.name = "test/double";
  task.axes = {"N"};
  TensorSpec x{.name = "x", .dtype = DType::f32, .shape = {"N"}};
  TensorSpec y{.name = "y", .dtype = DType::bf16, .shape = {"N"}};
  y.tolerance = Tolerance{Tolerance::Metric::numeric, 1e-5, 0.016, 0.002};
  task.inputs = {x};
  task.outputs = {y};
  return task;
}

struct Fixture : ::testing::Test {
  Task task = double_task();
  Double code;
  Scalars scalars;
  at::Tensor x = at::normal(0.0, 1.0, {1024}, at::make_generator<at::CPUGeneratorImpl>(7), at::TensorOptions());
  TensorMap want;
  void SetUp() override {
    TensorMap oracle_inputs{{"x", x.to(at::kDouble)}};
    want = code.reference(oracle_inputs, scalars);
  }
  Verdict run(const at::Tensor& y, std::vector<GuardViolation> violations = {}) {
    return check(task, code, scalars, {{"y", y}}, want, violations);
  }
};

TEST_F(Fixture, CorrectOutputPasses) {
  const auto v = run((2.0 * x).to(at::kBFloat16));
  EXPECT_EQ(v.status, Status::passed) << v.message;
  ASSERT_EQ(v.comparisons.size(), 1u);
  EXPECT_TRUE(v.comparisons[0].passed);
}

TEST_F(Fixture, WrongValuesAreIncorrectNumerics) {
  const auto v = run((2.1 * x).to(at::kBFloat16));
  EXPECT_EQ(v.status, Status::incorrect_numerics);
  EXPECT_NE(v.message.find("'y'"), std::string::npos) << v.message;
}

TEST_F(Fixture, Float32WrittenIntoBfloat16IsIncorrectDtype) {
  // The first half of the float32 values fill the bf16 buffer; the rest ran into the guard region.
  const auto as_f32 = (2.0 * x).to(at::kFloat).narrow(0, 0, 512).contiguous();
  const auto y = as_f32.view(at::kBFloat16);  // 1024 bf16 slots holding 512 floats
  const auto v = run(y, {{"y", "after", 2048}});
  EXPECT_EQ(v.status, Status::incorrect_dtype) << v.message;
  EXPECT_NE(v.message.find("f32"), std::string::npos) << v.message;
}

TEST_F(Fixture, UnwrittenTailIsIncorrectShape) {
  auto y = (2.0 * x).to(at::kBFloat16);
  y.narrow(0, 700, 324).fill_(std::numeric_limits<float>::quiet_NaN());  // the poison, never overwritten
  const auto v = run(y);
  EXPECT_EQ(v.status, Status::incorrect_shape) << v.message;
  EXPECT_NE(v.message.find("700 of 1024"), std::string::npos) << v.message;
}

TEST_F(Fixture, WritingBeforeAnOutputIsRejected) {
  const auto v = run((2.0 * x).to(at::kBFloat16), {{"y", "before", 16}});
  EXPECT_EQ(v.status, Status::rejected);
}

TEST_F(Fixture, WritingIntoAnInputsGuardIsRejected) {
  const auto v = run((2.0 * x).to(at::kBFloat16), {{"x", "after", 4}});
  EXPECT_EQ(v.status, Status::rejected);
  EXPECT_NE(v.message.find("'x'"), std::string::npos) << v.message;
}

}  // namespace
}  // namespace d2k
