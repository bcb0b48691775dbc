// The runner's reading of a worker's evidence stream (runner/worker_run.hpp), against a stand-in worker
// (fake_worker.cpp) that writes what each case asks: a stream that breaks the protocol anywhere makes
// the whole report untrusted, with the reason.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "runner/worker_run.hpp"

using namespace d2k;

namespace {

WorkerRequest fake_request() {
  WorkerRequest request;
  request.library = "/nonexistent.so";
  request.inputs = {WireTensor{.name = "x", .dtype = DType::f32, .shape = {3}, .strides = {1}}};
  request.outputs = {WireTensor{.name = "y", .dtype = DType::f32, .shape = {2, 2}, .strides = {2, 1}}};
  request.second_draw = false;
  return request;
}

WorkerLaunch fake_launch(double timeout_seconds = 20) {
  return WorkerLaunch{
      .worker = D2K_FAKE_WORKER_PATH, .scratch_dir = testing::TempDir(), .timeout_seconds = timeout_seconds};
}

WorkerOutcome run_fake(const std::string& mode) {
  ::setenv("D2K_FAKE_MODE", mode.c_str(), 1);
  const std::string x(12, 'x');
  WorkerOutcome outcome = run_worker(fake_launch(), fake_request(), {x}, {});
  ::unsetenv("D2K_FAKE_MODE");
  return outcome;
}

void expect_forged(const std::string& mode, const std::string& fragment) {
  const WorkerOutcome outcome = run_fake(mode);
  ASSERT_TRUE(outcome.forged) << mode << ": " << outcome.process.describe() << "\n" << outcome.process.output;
  EXPECT_NE(outcome.forged->find(fragment), std::string::npos) << mode << ": " << *outcome.forged;
  EXPECT_FALSE(outcome.report.checked) << mode << ": nothing of a forged stream is kept";
}

}  // namespace

TEST(WorkerRun, AnHonestStreamBecomesAReport) {
  const WorkerOutcome outcome = run_fake("honest");
  ASSERT_FALSE(outcome.forged) << *outcome.forged;
  EXPECT_TRUE(outcome.process.ok()) << outcome.process.output;
  EXPECT_TRUE(outcome.report.ended);
  EXPECT_EQ(outcome.report.device_name, "fake");
  ASSERT_TRUE(outcome.report.checked);
  ASSERT_EQ(outcome.report.checked->size(), 1u);
  EXPECT_EQ((*outcome.report.checked)[0].size(), 16u);
  EXPECT_EQ(outcome.report.reached, Stage::setup);
}

TEST(WorkerRun, AStreamThatBreaksTheProtocolIsForged) {
  expect_forged("wrong-token", "does not carry the evaluation's token");
  expect_forged("gap", "arrived where frame 1 was due");
  expect_forged("garbage", "malformed");
  expect_forged("unknown-kind", "which the worker never sends");
  expect_forged("after-end", "after the worker's end");
  expect_forged("twice", "the checked outputs twice");
  expect_forged("short-outputs", "not the outputs'");
  expect_forged("stage-back", "stage load came after stage run");
  expect_forged("bad-fields", "do not parse");
}

// The draws are taken once the worker has started: a wait for them is the orchestrator's, not counted
// against the worker's timeout.
TEST(WorkerRun, DrawsTakenLateAreNotTheWorkersTime) {
  const std::string x(12, 'x');
  int taken = 0;
  const WorkerOutcome outcome = run_worker(fake_launch(0.5), fake_request(), [&] {
    ++taken;
    std::this_thread::sleep_for(std::chrono::milliseconds(900));
    return DrawPair{{x}, {}};
  });
  EXPECT_EQ(taken, 1);
  ASSERT_FALSE(outcome.forged) << *outcome.forged;
  EXPECT_TRUE(outcome.process.ok()) << outcome.process.describe() << "\n" << outcome.process.output;
  EXPECT_TRUE(outcome.report.ended);
}

// The inputs file is filled after the worker has started: the worker's descriptor of it is read-only, so
// nothing in the worker can write it before it is sealed either.
TEST(WorkerRun, TheWorkerCannotWriteItsInputsFile) {
  const WorkerOutcome outcome = run_fake("write-inputs");
  EXPECT_TRUE(outcome.process.ok()) << outcome.process.describe() << "\n" << outcome.process.output;
}

// Draws that cannot be made: the worker gets none (its stdin closes and it stops), and the caller hears
// why once it has ended.
TEST(WorkerRun, DrawsThatCannotBeTakenAreRethrownOnceTheWorkerHasEnded) {
  try {
    run_worker(fake_launch(), fake_request(), []() -> DrawPair { throw Error("the draw failed"); });
    FAIL() << "no exception";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "the draw failed");
  }
  // Draws that do not match the request are the caller's mistake too.
  EXPECT_THROW(run_worker(fake_launch(), fake_request(), [] { return DrawPair{}; }), Error);
}
