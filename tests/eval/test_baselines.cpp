// The baselines' timing on the cpu device, with the test task demo/batched_matmul
// (tests/core/data/tasks), whose eager reference loops over the batch and whose library path is one
// batched at::matmul.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "core/error.hpp"
#include "core/task_loader.hpp"
#include "eval/baselines.hpp"
#include "reference/inputs.hpp"
#include "reference/oracle.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;

const fs::path kTasks = fs::path(D2K_TEST_DATA) / "core" / "data" / "tasks";

// The test task's code, counting its calls and the input copies (by address) each path was given.
class Counting final : public TaskCode {
 public:
  explicit Counting(bool library) : inner_(make_task_code("demo/batched_matmul")), library_(library) {}
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override {
    reference_copies.insert(inputs.at("a").data_ptr());
    ++reference_calls;
    return inner_->reference(inputs, scalars);
  }
  bool has_library() const override { return library_; }
  TensorMap library(TensorMap& inputs, const Scalars& scalars) const override {
    library_copies.insert(inputs.at("a").data_ptr());
    ++library_calls;
    return inner_->library(inputs, scalars);
  }
  mutable int reference_calls = 0, library_calls = 0;
  mutable std::set<void*> reference_copies, library_copies;

 private:
  std::unique_ptr<TaskCode> inner_;
  bool library_;
};

struct Fixture {
  Task task = load_task(kTasks / "demo" / "batched_matmul", kTasks);
  const Workload& workload = *task.find_workload("square-B8");
  Counting code{true};
  TensorMap inputs = make_inputs(task, code, workload, 7);
  Scalars scalars = scalars_for(task, workload);
  TimingConfig timing{.warmup = 1, .min_samples = 5, .max_samples = 5, .max_seconds = 10.0, .target_ci = 0.0};
};

TEST(Baselines, TheTestTaskRegistersALibraryPath) {
  const auto code = make_task_code("demo/batched_matmul");
  ASSERT_NE(code, nullptr);
  EXPECT_TRUE(code->has_library());
  EXPECT_FALSE(make_task_code("norm/fused_add_rmsnorm")->has_library());
}

TEST(Baselines, TheLibraryPathComputesWhatTheReferenceDoes) {
  Fixture f;
  auto oracle_inputs = place_inputs(f.inputs, Device::cpu, Precision::oracle);
  auto library_inputs = place_inputs(f.inputs, Device::cpu, Precision::oracle);
  const auto want = call_reference(f.task, f.code, oracle_inputs, f.scalars).at("c");
  const auto got = call_library(f.task, f.code, library_inputs, f.scalars).at("c");
  EXPECT_EQ(got.sizes(), want.sizes());
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-9);
}

TEST(Baselines, CallLibraryWithoutALibraryPathNamesTheReference) {
  Fixture f;
  Counting none(false);
  auto inputs = place_inputs(f.inputs, Device::cpu, Precision::native);
  try {
    call_library(f.task, none, inputs, f.scalars);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("demo/batched_matmul/reference.cpp: the task has no library path"),
              std::string::npos) << e.what();
  }
}

TEST(Baselines, TheLibraryIsTimedLikeTheEagerReferenceAndOnce) {
  Fixture f;
  BaselineCache cache;
  const auto library = library_time(f.task, f.workload, f.code, f.inputs, f.scalars, Device::cpu, f.timing, cache).summary;
  ASSERT_TRUE(library);
  EXPECT_EQ(library->samples, 5);
  EXPECT_GT(library->median_ms, 0.0);
  EXPECT_EQ(f.code.library_calls, 6) << "one warm-up call and five samples";
  EXPECT_EQ(f.code.reference_calls, 0);

  const auto eager = baseline_time(f.task, f.workload, f.code, f.inputs, f.scalars, Device::cpu, f.timing, cache);
  ASSERT_TRUE(eager);
  EXPECT_EQ(f.code.reference_calls, 6);
  // The same rotation: the calls cycle through as many copies of the inputs, more than one.
  EXPECT_GT(f.code.library_copies.size(), 1u);
  EXPECT_EQ(f.code.library_copies.size(), f.code.reference_copies.size());

  // Both are kept, under keys of their own, and neither is timed again.
  EXPECT_EQ(cache.size(), 2u);
  const auto again = library_time(f.task, f.workload, f.code, f.inputs, f.scalars, Device::cpu, f.timing, cache).summary;
  ASSERT_TRUE(again);
  EXPECT_EQ(again->median_ms, library->median_ms);
  baseline_time(f.task, f.workload, f.code, f.inputs, f.scalars, Device::cpu, f.timing, cache);
  EXPECT_EQ(f.code.library_calls, 6);
  EXPECT_EQ(f.code.reference_calls, 6);
}

TEST(Baselines, ATaskWithoutALibraryPathHasNoLibraryTime) {
  Fixture f;
  Counting none(false);
  BaselineCache cache;
  const auto library = library_time(f.task, f.workload, none, f.inputs, f.scalars, Device::cpu, f.timing, cache);
  EXPECT_FALSE(library.summary);
  EXPECT_TRUE(library.refused.empty());
  EXPECT_EQ(none.library_calls, 0);
  EXPECT_TRUE(cache.empty());
}

// A library path that refuses the workload's shape, as cuBLASLt's block-scaled fp8 GEMM refuses some.
class Refusing final : public TaskCode {
 public:
  Refusing() : inner_(make_task_code("demo/batched_matmul")) {}
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override { return inner_->reference(inputs, scalars); }
  bool has_library() const override { return true; }
  TensorMap library(TensorMap&, const Scalars&) const override {
    ++calls;
    throw std::runtime_error("CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasLtMatmulAlgoGetHeuristic(...)`\nframe #0: ...");
  }
  mutable int calls = 0;

 private:
  std::unique_ptr<TaskCode> inner_;
};

TEST(Baselines, ALibraryThatRefusesTheWorkloadHasNoTimeAndSaysWhyInOneLine) {
  Fixture f;
  Refusing code;
  BaselineCache cache;
  const auto library = library_time(f.task, f.workload, code, f.inputs, f.scalars, Device::cpu, f.timing, cache);
  EXPECT_FALSE(library.summary);
  EXPECT_EQ(library.refused, "CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasLtMatmulAlgoGetHeuristic(...)`");
  EXPECT_EQ(code.calls, 1) << "the first call's error ends the timing";
  EXPECT_TRUE(cache.empty()) << "no time is kept for it";
}

// A library path with a setup: a tensor computed from the inputs once, outside the timed calls.
class WithSetup final : public TaskCode {
 public:
  WithSetup() : inner_(make_task_code("demo/batched_matmul")) {}
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override { return inner_->reference(inputs, scalars); }
  bool has_library() const override { return true; }
  TensorMap library_setup(const TensorMap& inputs, const Scalars&) const override {
    ++setups;
    return {{"setup", inputs.at("a").sum()}};
  }
  TensorMap library(TensorMap& inputs, const Scalars& scalars) const override {
    const auto it = inputs.find("setup");
    seen.insert(it == inputs.end() ? nullptr : it->second.data_ptr());
    copies.insert(inputs.at("a").data_ptr());
    TensorMap kept = inputs;
    kept.erase("setup");
    return inner_->library(kept, scalars);
  }
  mutable int setups = 0;
  mutable std::set<void*> seen, copies;

 private:
  std::unique_ptr<TaskCode> inner_;
};

TEST(Baselines, TheLibrarySetupRunsOnceOutsideTheTimedCallsAndServesEveryCopy) {
  Fixture f;
  WithSetup code;
  BaselineCache cache;
  ASSERT_TRUE(library_time(f.task, f.workload, code, f.inputs, f.scalars, Device::cpu, f.timing, cache).summary);
  EXPECT_EQ(code.setups, 1);
  EXPECT_GT(code.copies.size(), 1u) << "the inputs rotate";
  ASSERT_EQ(code.seen.size(), 1u) << "one setup, the same tensor in every copy";
  EXPECT_NE(*code.seen.begin(), nullptr) << "every timed call found the setup";
}

}  // namespace
}  // namespace d2k
