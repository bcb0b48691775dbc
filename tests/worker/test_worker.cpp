// The d2k-worker executable end to end on the cpu device: small solutions from solutions/, built
// with the builder, run through run_process exactly as the orchestrator runs them.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "harness.hpp"

using namespace d2k;
using namespace d2k::test;

namespace {

[[maybe_unused]] testing::Environment* const kCleanup =
    testing::AddGlobalTestEnvironment(new RemoveScratchIfAllPassed);

class Worker : public testing::Test {
 protected:
  void SetUp() override { dir_ = test_dir(); }

  WorkerRun run(const WorkerRequest& request, double timeout = 60) {
    return run_worker(dir_, request, timeout);
  }

  // y = x + alpha * z on 4x6 f32 tensors: x with a padded row stride, z column-major, y contiguous.
  WorkerRequest axpy_request(const fs::path& library) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    x_.resize(30);
    z_.resize(24);
    for (float& v : x_) v = normal(random_);
    for (float& v : z_) v = normal(random_);
    write_raw(dir_ / "x.bin", x_);
    write_raw(dir_ / "z.bin", z_);
    WorkerRequest request;
    request.library = library.string();
    request.device = Device::cpu;
    request.inputs = {tensor("x", DType::f32, {4, 6}, {8, 1}, "x.bin"),
                      tensor("z", DType::f32, {4, 6}, {1, 4}, "z.bin")};
    request.outputs = {tensor("y", DType::f32, {4, 6}, {6, 1}, "y.bin")};
    request.scalars = {WireScalar{"alpha", false, 0.75}};
    request.time = false;
    return request;
  }

  float expected_y(int i, int j) const { return x_[i * 8 + j] + 0.75f * z_[i + 4 * j]; }

  fs::path dir_;
  std::mt19937 random_{20250101};
  std::vector<float> x_, z_;
};

}  // namespace

TEST_F(Worker, RunsACorrectSolutionWithWorkspacePrepareAndTiming) {
  WorkerRequest request = axpy_request(built("axpy.cpp"));
  request.time = true;
  request.timing.warmup = 1;
  request.timing.min_samples = 3;
  request.timing.max_samples = 10;
  request.timing.max_seconds = 0.0;
  WorkerRun done = run(request);
  ASSERT_TRUE(done.process.ok()) << done.process.describe() << "\n" << done.process.output;
  ASSERT_TRUE(done.result);
  EXPECT_EQ(done.result->status, "ok") << done.result->phase << ": " << done.result->message;
  EXPECT_EQ(done.result->phase, "done");
  EXPECT_TRUE(done.result->guard_violations.empty());
  EXPECT_EQ(done.result->samples_ms.size(), 3u);
  for (double ms : done.result->samples_ms) EXPECT_GT(ms, 0.0);
  EXPECT_FALSE(done.result->device_name.empty());

  std::vector<float> y = read_raw<float>(dir_ / "y.bin");
  ASSERT_EQ(y.size(), 24u);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 6; ++j) EXPECT_FLOAT_EQ(y[i * 6 + j], expected_y(i, j)) << i << "," << j;
  }
}

TEST_F(Worker, InPlaceOutputsShareTheInputAndIntScalarsArriveAsInts) {
  std::uniform_int_distribution<int32_t> values(-1000, 1000);
  std::vector<int32_t> x(1000);
  for (int32_t& v : x) v = values(random_);
  write_raw(dir_ / "x.bin", x);
  WorkerRequest request;
  request.library = built("scale_inplace.cpp").string();
  request.device = Device::cpu;
  request.inputs = {tensor("x", DType::i32, {10, 100}, {100, 1}, "x.bin")};
  request.outputs = {tensor("x", DType::i32, {10, 100}, {100, 1}, "x.out.bin")};
  request.outputs[0].inplace = true;
  request.scalars = {WireScalar{"factor", true, 3.0}};
  request.time = false;
  WorkerRun done = run(request);
  ASSERT_TRUE(done.result) << done.process.output;
  EXPECT_EQ(done.result->status, "ok") << done.result->message;
  EXPECT_EQ(done.result->phase, "done");
  EXPECT_TRUE(done.result->samples_ms.empty());
  std::vector<int32_t> out = read_raw<int32_t>(dir_ / "x.out.bin");
  ASSERT_EQ(out.size(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(out[i], 3 * x[i]) << i;
}

TEST_F(Worker, TheSolutionsErrorMessageComesBack) {
  WorkerRequest request = axpy_request(built("reports_error.cpp"));
  request.time = true;
  WorkerRun done = run(request);
  EXPECT_TRUE(done.process.ok()) << done.process.output;
  ASSERT_TRUE(done.result);
  EXPECT_EQ(done.result->status, "runtime_error");
  EXPECT_EQ(done.result->phase, "run");
  EXPECT_NE(done.result->message.find("unsupported rank 2"), std::string::npos) << done.result->message;
  EXPECT_NE(done.result->message.find("returned 7"), std::string::npos) << done.result->message;
  EXPECT_TRUE(done.result->samples_ms.empty());
}

TEST_F(Worker, WritesOutsideTheOutputAreReportedAsGuardViolations) {
  WorkerRun done = run(axpy_request(built("writes_past_output.cpp")));
  ASSERT_TRUE(done.result) << done.process.output;
  EXPECT_EQ(done.result->status, "ok");
  std::map<std::string, int64_t> sides;
  for (const auto& violation : done.result->guard_violations) {
    EXPECT_EQ(violation.tensor, "y");
    sides[violation.side] = violation.bytes;
  }
  ASSERT_EQ(sides.size(), 2u);
  EXPECT_GT(sides["after"], 32);  // 16 floats of 1.0f over a random pattern
  EXPECT_LE(sides["after"], 64);
  EXPECT_GT(sides["before"], 0);
  EXPECT_LE(sides["before"], 4);
}

TEST_F(Worker, OutputsTheSolutionLeavesAloneComeBackPoisoned) {
  WorkerRun done = run(axpy_request(built("writes_nothing.cpp")));
  ASSERT_TRUE(done.result) << done.process.output;
  EXPECT_EQ(done.result->status, "ok");
  std::vector<uint32_t> y = read_raw<uint32_t>(dir_ / "y.bin");
  ASSERT_EQ(y.size(), 24u);
  for (uint32_t bits : y) EXPECT_EQ(bits, 0xFFFFFFFFu);
}

// A task that is not deterministic gets its last timed call's outputs back in a file of their own (the
// orchestrator checks them against the oracle); the checked call's outputs stay in the output's file.
TEST_F(Worker, TheLastTimedCallsOutputsComeBackBesideTheCheckedCalls) {
  WorkerRequest request = axpy_request(built("computes_once.cpp"));
  request.deterministic = false;
  request.time = true;
  request.timing.max_samples = 3;
  WorkerRun timed = run(request);
  ASSERT_TRUE(timed.result) << timed.process.output;
  EXPECT_EQ(timed.result->status, "ok");
  EXPECT_FLOAT_EQ(read_raw<float>(dir_ / "y.bin")[7], expected_y(1, 1));
  std::vector<uint32_t> y = read_raw<uint32_t>(dir_ / "y.bin.timed");
  ASSERT_EQ(y.size(), 24u);
  for (uint32_t bits : y) EXPECT_EQ(bits, 0xFFFFFFFFu);  // it computed nothing: the poison
}

// A deterministic task's timed calls are compared bytewise with the checked call in the worker; a
// mismatch is reported in the result, and no file of the last timed call is needed.
TEST_F(Worker, ADeterministicTasksTimedCallsAreComparedNotSentBack) {
  WorkerRequest request = axpy_request(built("computes_once.cpp"));
  request.deterministic = true;
  request.time = true;
  request.timing.max_samples = 3;
  WorkerRun timed = run(request);
  ASSERT_TRUE(timed.result) << timed.process.output;
  EXPECT_EQ(timed.result->status, "ok");
  EXPECT_FLOAT_EQ(read_raw<float>(dir_ / "y.bin")[7], expected_y(1, 1));
  EXPECT_FALSE(fs::exists(dir_ / "y.bin.timed"));
  EXPECT_GT(timed.result->timed_check.mismatched_calls, 0);
}

TEST_F(Worker, ACrashEndsTheProcessByItsSignalWithNoResult) {
  WorkerRun done = run(axpy_request(built("segfaults.cpp")));
  EXPECT_EQ(done.process.end, ProcessResult::End::signaled) << done.process.describe();
  EXPECT_EQ(done.process.signal, SIGSEGV);
  EXPECT_FALSE(done.result);
}

TEST_F(Worker, AHangIsEndedByTheTimeout) {
  WorkerRun done = run(axpy_request(built("hangs.cpp")), 1.0);
  EXPECT_EQ(done.process.end, ProcessResult::End::timed_out);
  EXPECT_FALSE(done.result);
}

// Hangs in its timed calls only: the correctness call's outputs and a result saying "timing" remain.
TEST_F(Worker, AHangWhileTimingLeavesTheOutputsAndAPartialResult) {
  WorkerRequest request = axpy_request(built("hangs_when_timed.cpp"));
  request.time = true;
  request.timing.warmup = 0;
  WorkerRun done = run(request, 1.0);
  EXPECT_EQ(done.process.end, ProcessResult::End::timed_out);
  ASSERT_TRUE(done.result);
  EXPECT_EQ(done.result->status, "ok");
  EXPECT_EQ(done.result->phase, "timing");
  EXPECT_EQ(done.result->token, done.token) << "the result left by a crash while timing is checked too";
  EXPECT_TRUE(done.result->samples_ms.empty());
  std::vector<float> y = read_raw<float>(dir_ / "y.bin");
  ASSERT_EQ(y.size(), 24u);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 6; ++j) EXPECT_FLOAT_EQ(y[i * 6 + j], expected_y(i, j)) << i << "," << j;
  }
}

TEST_F(Worker, ALibraryWithoutTheEntryPointFailsToLoad) {
  WorkerRun done = run(axpy_request(built("no_entry_point.cpp")));
  EXPECT_TRUE(done.process.ok()) << done.process.output;
  ASSERT_TRUE(done.result);
  EXPECT_EQ(done.result->status, "runtime_error");
  EXPECT_EQ(done.result->phase, "load");
  EXPECT_NE(done.result->message.find("d2k_run"), std::string::npos) << done.result->message;

  WorkerRequest missing = axpy_request(dir_ / "no-such-library.so");
  done = run(missing);
  ASSERT_TRUE(done.result);
  EXPECT_EQ(done.result->phase, "load");
  EXPECT_NE(done.result->message.find("no-such-library.so"), std::string::npos) << done.result->message;
}

TEST_F(Worker, ABadRequestEndsWithAMessageAndNoResult) {
  WorkerRequest request = axpy_request(built("axpy.cpp"));
  write_raw(dir_ / "z.bin", std::vector<float>(23));  // one element short of z's span
  WorkerRun done = run(request);
  EXPECT_EQ(done.process.end, ProcessResult::End::exited);
  EXPECT_EQ(done.process.exit_code, 2);
  EXPECT_NE(done.process.output.find("'z'"), std::string::npos) << done.process.output;
  EXPECT_NE(done.process.output.find("96"), std::string::npos) << done.process.output;
  EXPECT_FALSE(done.result);

  request.inputs[0].file = "missing.bin";
  write_raw(dir_ / "z.bin", z_);
  done = run(request);
  EXPECT_EQ(done.process.exit_code, 2);
  EXPECT_NE(done.process.output.find("missing.bin"), std::string::npos) << done.process.output;

  ProcessSpec no_arguments;
  no_arguments.argv = {D2K_WORKER_PATH};
  ProcessResult usage = run_process(no_arguments);
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_NE(usage.output.find("usage"), std::string::npos);
}

TEST_F(Worker, AThreadLeftRunningAfterTheCallIsRejected) {
  WorkerRun done = run(axpy_request(built("leaves_thread.cpp")));
  ASSERT_TRUE(done.result) << done.process.output;
  EXPECT_EQ(done.result->status, "rejected");
  EXPECT_EQ(done.result->phase, "run");
  EXPECT_NE(done.result->message.find("left 1 thread(s) running after d2k_run returned"), std::string::npos)
      << done.result->message;
}

TEST_F(Worker, ThreadsJoinedWithinTheCallAreAllowedEvenWhileTimed) {
  WorkerRequest request = axpy_request(built("joins_threads.cpp"));
  request.time = true;
  request.timing.warmup = 2;
  request.timing.min_samples = 20;
  request.timing.max_samples = 20;
  WorkerRun done = run(request);
  ASSERT_TRUE(done.result) << done.process.output;
  EXPECT_EQ(done.result->status, "ok") << done.result->phase << ": " << done.result->message;
  EXPECT_EQ(done.result->samples_ms.size(), 20u);
}

// The second draw runs first in the same buffers, twice when asked (the two runs compared in the
// worker); its outputs come back in a file of their own, and the first draw's in the output's own file.
TEST_F(Worker, TheSecondDrawRunsFirstAndIsRepeatedInTheSameBuffers) {
  WorkerRequest request = axpy_request(built("axpy.cpp"));
  const std::vector<float> x1 = x_, z1 = z_;
  axpy_request(request.library);  // draws x_, z_ again and writes them to x.bin, z.bin
  const std::vector<float> x2 = x_, z2 = z_;
  fs::rename(dir_ / "x.bin", dir_ / "x2.bin");
  fs::rename(dir_ / "z.bin", dir_ / "z2.bin");
  write_raw(dir_ / "x.bin", x1);
  write_raw(dir_ / "z.bin", z1);
  request.second_inputs = {"x2.bin", "z2.bin"};
  request.deterministic = true;
  WorkerRun done = run(request);
  ASSERT_TRUE(done.result) << done.process.output;
  EXPECT_EQ(done.result->status, "ok") << done.result->phase << ": " << done.result->message;
  const auto first = read_raw<float>(dir_ / "y.bin");
  const auto second = read_raw<float>(dir_ / "y.bin.second");
  ASSERT_EQ(first.size(), 24u);
  ASSERT_EQ(second.size(), 24u);
  EXPECT_FALSE(fs::exists(dir_ / "y.bin.repeat"));  // compared in the worker, not sent back
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 6; ++j) {
      EXPECT_FLOAT_EQ(first[i * 6 + j], x1[i * 8 + j] + 0.75f * z1[i + 4 * j]);
      EXPECT_FLOAT_EQ(second[i * 6 + j], x2[i * 8 + j] + 0.75f * z2[i + 4 * j]);
    }
  }
  EXPECT_EQ(read_raw<float>(dir_ / "x2.bin.after"), x2);
  EXPECT_EQ(read_raw<float>(dir_ / "x.bin.after"), x1);
}

// A deterministic task's second draw runs twice; outputs that differ between the two runs (here: the
// repeat writes nothing and leaves the poison) are rejected by the worker, naming the output.
TEST_F(Worker, ADeterministicTaskWhoseRepeatDiffersIsRejected) {
  WorkerRequest request = axpy_request(built("computes_once.cpp"));
  fs::copy_file(dir_ / "x.bin", dir_ / "x2.bin");
  fs::copy_file(dir_ / "z.bin", dir_ / "z2.bin");
  request.second_inputs = {"x2.bin", "z2.bin"};
  request.deterministic = true;
  WorkerRun done = run(request);
  ASSERT_TRUE(done.result) << done.process.output;
  EXPECT_EQ(done.result->status, "rejected");
  EXPECT_EQ(done.result->phase, "repeat");
  // Nearly all 96 bytes: a value may happen to hold a 0xFF byte of the poison.
  EXPECT_NE(done.result->message.find("output 'y' changed between two runs on the same inputs ("), std::string::npos)
      << done.result->message;
  EXPECT_NE(done.result->message.find(" of 96 bytes differ)"), std::string::npos) << done.result->message;
}

namespace {

// Few timed calls, exactly `samples` of them after one warm-up call.
void time_exactly(WorkerRequest& request, int samples) {
  request.time = true;
  request.timing.warmup = 1;
  request.timing.min_samples = samples;
  request.timing.max_samples = samples;
  request.timing.max_seconds = 60;
  request.timing.target_ci = 0;
}

std::vector<std::pair<std::string, std::string>> read_address_log(const fs::path& file) {
  std::vector<std::pair<std::string, std::string>> calls;
  std::ifstream in(file);
  std::string x, y;
  while (in >> x >> y) calls.emplace_back(x, y);
  return calls;
}

}  // namespace

TEST_F(Worker, TimedCallsRotateThroughCopiesAtOtherAddresses) {
  WorkerRequest request = axpy_request(built("logs_addresses.cpp"));
  time_exactly(request, 7);
  request.timing.rotate_max_sets = 4;  // the cpu's cache would ask for more copies of these tiny tensors
  const fs::path log = dir_ / "addresses.txt";
  ::setenv("D2K_TEST_ADDRESS_LOG", log.c_str(), 1);
  WorkerRun done = run(request);
  ::unsetenv("D2K_TEST_ADDRESS_LOG");
  ASSERT_TRUE(done.result) << done.process.output;
  ASSERT_EQ(done.result->status, "ok") << done.result->message;
  EXPECT_EQ(done.result->rotation_sets, 4);
  EXPECT_EQ(done.result->rotation_bytes, 4 * (30 + 24 + 24) * 4);  // x spans 30 floats, z and y 24

  const auto calls = read_address_log(log);
  ASSERT_EQ(calls.size(), 9u);  // the correctness call, one warm-up call, seven timed ones
  std::set<std::string> xs, ys;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    xs.insert(calls[i].first);
    ys.insert(calls[i].second);
    if (i > 0) EXPECT_NE(calls[i].first, calls[i - 1].first) << "call " << i << " found x where call " << i - 1 << " did";
    if (i >= 4) EXPECT_EQ(calls[i].first, calls[i - 4].first) << "the copies are used in turn";
  }
  EXPECT_EQ(xs.size(), 4u);
  EXPECT_EQ(ys.size(), 4u);
  EXPECT_EQ(done.result->timed_check.calls, 8);
  EXPECT_EQ(done.result->timed_check.mismatched_calls, 0);
  EXPECT_TRUE(done.result->timed_check.modified_inputs.empty());
  EXPECT_TRUE(done.result->guard_violations.empty());

  // The last timed call's outputs, which are right.
  std::vector<float> y = read_raw<float>(dir_ / (request.deterministic ? "y.bin" : "y.bin.timed"));
  ASSERT_EQ(y.size(), 24u);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 6; ++j) EXPECT_FLOAT_EQ(y[i * 6 + j], expected_y(i, j)) << i << "," << j;
  }

  // Rotation off: one copy, every call at the same address.
  fs::remove(log);
  request.timing.rotate_cache_multiple = 0;
  ::setenv("D2K_TEST_ADDRESS_LOG", log.c_str(), 1);
  done = run(request);
  ::unsetenv("D2K_TEST_ADDRESS_LOG");
  ASSERT_TRUE(done.result) << done.process.output;
  EXPECT_EQ(done.result->rotation_sets, 1);
  xs.clear();
  for (const auto& call : read_address_log(log)) xs.insert(call.first);
  EXPECT_EQ(xs.size(), 1u);
}

TEST_F(Worker, AWrongResultInAnyTimedCallIsCaught) {
  WorkerRequest request = axpy_request(built("wrong_on_third_call.cpp"));
  time_exactly(request, 6);
  WorkerRun done = run(request);
  ASSERT_TRUE(done.result) << done.process.output;
  EXPECT_EQ(done.result->status, "ok") << done.result->message;
  const TimedCallCheck& check = done.result->timed_check;
  EXPECT_EQ(check.calls, 7);
  EXPECT_EQ(check.mismatched_calls, 1);
  EXPECT_EQ(check.first_call, 2);  // the third call overall: the correctness call, then warm-up 1, then this
  EXPECT_EQ(check.first_output, "y");
  EXPECT_GE(check.first_bytes, 1);
  EXPECT_LE(check.first_bytes, 4);
  EXPECT_GE(check.first_set, 0);
  EXPECT_LT(check.first_set, done.result->rotation_sets);

  // The same solution, told the op is not deterministic: no bytewise check, the last call's outputs.
  request.deterministic = false;
  done = run(request);
  ASSERT_TRUE(done.result) << done.process.output;
  EXPECT_EQ(done.result->timed_check.calls, 0);
  EXPECT_EQ(done.result->timed_check.mismatched_calls, 0);
}

TEST_F(Worker, ACachedResultFailsTheCheckOfEveryLaterCall) {
  WorkerRequest request = axpy_request(built("computes_once.cpp"));
  time_exactly(request, 5);
  WorkerRun done = run(request);
  ASSERT_TRUE(done.result) << done.process.output;
  EXPECT_EQ(done.result->timed_check.calls, 6);
  EXPECT_EQ(done.result->timed_check.mismatched_calls, 6);
  EXPECT_EQ(done.result->timed_check.first_call, 1);
}

// Each call multiplies x in place: without the restore before every call, the second call on a copy
// would return factor^2 * x and the bytewise check would fail.
TEST_F(Worker, InPlaceInputsAreRestoredBeforeEveryTimedCall) {
  std::uniform_int_distribution<int32_t> values(-1000, 1000);
  std::vector<int32_t> x(1000);
  for (int32_t& v : x) v = values(random_);
  write_raw(dir_ / "x.bin", x);
  WorkerRequest request;
  request.library = built("scale_inplace.cpp").string();
  request.device = Device::cpu;
  request.inputs = {tensor("x", DType::i32, {10, 100}, {100, 1}, "x.bin")};
  request.outputs = {tensor("x", DType::i32, {10, 100}, {100, 1}, "x.out.bin")};
  request.outputs[0].inplace = true;
  request.scalars = {WireScalar{"factor", true, 3.0}};
  time_exactly(request, 9);
  request.timing.rotate_max_sets = 3;
  WorkerRun done = run(request);
  ASSERT_TRUE(done.result) << done.process.output;
  EXPECT_EQ(done.result->status, "ok") << done.result->message;
  EXPECT_EQ(done.result->rotation_sets, 3);
  EXPECT_EQ(done.result->rotation_bytes, 3 * 4000);  // an in-place output adds no bytes of its own
  EXPECT_EQ(done.result->timed_check.calls, 10);
  EXPECT_EQ(done.result->timed_check.mismatched_calls, 0);
  std::vector<int32_t> out = read_raw<int32_t>(dir_ / "x.out.bin");
  ASSERT_EQ(out.size(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(out[i], 3 * x[i]) << i;
}

TEST_F(Worker, AnInputModifiedOnlyInARotatedCopyIsReported) {
  WorkerRequest request = axpy_request(built("modifies_rotated_input.cpp"));
  time_exactly(request, 4);
  request.timing.rotate_max_sets = 3;
  WorkerRun done = run(request);
  ASSERT_TRUE(done.result) << done.process.output;
  const auto& modified = done.result->timed_check.modified_inputs;
  ASSERT_EQ(modified.size(), 2u);
  EXPECT_EQ(modified[0], "'x' of copy 1");
  EXPECT_EQ(modified[1], "'x' of copy 2");
  // Copy 0 was left alone: what goes back to the orchestrator is what it sent.
  EXPECT_EQ(read_raw<float>(dir_ / "x.bin.after"), x_);
}

TEST_F(Worker, TheResultSaysWhereTheWorkersTimeWent) {
  WorkerRequest request = axpy_request(built("axpy.cpp"));
  time_exactly(request, 3);
  WorkerRun done = run(request);
  ASSERT_TRUE(done.result) << done.process.output;
  std::vector<std::string> names;
  double total = 0;
  for (const Phase& phase : done.result->phases) {
    names.push_back(phase.name);
    EXPECT_GE(phase.seconds, 0.0) << phase.name;
    total += phase.seconds;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"setup", "load", "correctness", "rotation", "timing", "finish"}));
  EXPECT_LE(total, done.process.seconds);
  EXPECT_FALSE(done.result->clocks) << "the cpu device has no GPU clocks";
}

// Threat 6: the token reaches the worker and no one else; the worker's result.json is the last word.
TEST_F(Worker, TheTokenIsTheWorkersAloneAndItsResultIsTheLastWord) {
  WorkerRequest request = axpy_request(built("reaches_past_the_end.cpp"));
  time_exactly(request, 2);
  WorkerRun done = run(request);
  ASSERT_TRUE(done.process.ok()) << done.process.describe() << "\n" << done.process.output;
  ASSERT_TRUE(done.result) << done.process.output;
  EXPECT_EQ(done.result->token, done.token);
  EXPECT_EQ(done.result->status, "ok") << done.result->phase << ": " << done.result->message;
  EXPECT_EQ(done.result->samples_ms.size(), 2u) << "d2k_release's result.json was not replaced";
  // The solution ran, could write files here, and found only /dev/null on its stdin.
  EXPECT_EQ(read_text(dir_ / "constructor.txt"), "loaded");
  EXPECT_EQ(read_text(dir_ / "stdin.txt"), "");
  EXPECT_EQ(read_text(dir_ / "stdin_is.txt"), "/dev/null");
  // The worker ended with _exit: neither the atexit handler nor the static destructor ran.
  EXPECT_FALSE(fs::exists(dir_ / "atexit.txt"));
  EXPECT_FALSE(fs::exists(dir_ / "destructor.txt"));
}

TEST_F(Worker, ATokenTooLongIsABadRequest) {
  ProcessSpec spec;
  spec.argv = {D2K_WORKER_PATH, (dir_ / "request.json").string()};
  spec.stdin_data = std::string(300, 'f');
  ProcessResult result = run_process(spec);
  EXPECT_EQ(result.exit_code, 2) << result.describe();
  EXPECT_NE(result.output.find("bad token"), std::string::npos) << result.output;
}
