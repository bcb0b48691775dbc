// The d2k-worker executable end to end on the cpu device: small solutions from solutions/, built with
// the builder, run through the runner (runner/worker_run.hpp) exactly as the evaluator runs them: the
// request and the draws on the control stream, the evidence back as frames.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>

#include <chrono>
#include <thread>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "core/call_patch.hpp"
#include "core/keyed_digest.hpp"
#include "harness.hpp"

using namespace d2k;
using namespace d2k::test;

namespace {

[[maybe_unused]] testing::Environment* const kCleanup =
    testing::AddGlobalTestEnvironment(new RemoveScratchIfAllPassed);

class Worker : public testing::Test {
 protected:
  // y = x + alpha * z on 4x6 f32 tensors: x with a padded row stride (it spans 30 floats), z
  // column-major, y contiguous. Both inputs perturbable in timed calls.
  WorkerRequest axpy_request(const fs::path& library) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    x_.resize(30);
    z_.resize(24);
    for (float& v : x_) v = normal(random_);
    for (float& v : z_) v = normal(random_);
    WorkerRequest request;
    request.library = library.string();
    request.device = Device::cpu;
    request.inputs = {tensor("x", DType::f32, {4, 6}, {8, 1}), tensor("z", DType::f32, {4, 6}, {1, 4})};
    request.inputs[0].perturb = request.inputs[1].perturb = true;
    request.outputs = {tensor("y", DType::f32, {4, 6}, {6, 1})};
    request.scalars = {WireScalar{"alpha", false, 0.75}};
    request.time = false;
    request.digest_key = 0x5eed;
    request.patch_seed = 77;
    request.sample_seed = 99;
    return request;
  }
  std::vector<std::string> axpy_draw() const { return {bytes_of(x_), bytes_of(z_)}; }
  // The worker on an axpy request made just before (its draw is made with the request).
  WorkerOutcome run_axpy(const WorkerRequest& request, std::vector<std::string> second = {}, double timeout = 60) {
    return run_worker(request, axpy_draw(), second, timeout);
  }

  // y of the axpy on these inputs (x laid out as above, z column-major).
  static std::vector<float> axpy(const std::vector<float>& x, const std::vector<float>& z) {
    std::vector<float> y(24);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 6; ++j) y[i * 6 + j] = x[i * 8 + j] + 0.75f * z[i + 4 * j];
    return y;
  }
  // The axpy of timed call `call`'s inputs: the draw with that call's patch.
  std::vector<float> axpy_of_call(const WorkerRequest& request, int64_t call) const {
    std::vector<float> x = x_, z = z_;
    const auto patch = call_patch(request.patch_seed, call, request.inputs, request.patch_swaps);
    apply_swaps(patch, 0, x.data(), sizeof(float));
    apply_swaps(patch, 1, z.data(), sizeof(float));
    return axpy(x, z);
  }

  static void time_exactly(WorkerRequest& request, int samples) {
    request.time = true;
    request.timing.warmup = 1;
    request.timing.min_samples = request.timing.max_samples = samples;
    request.timing.max_seconds = 60;
    request.timing.target_ci = 0;
  }

  static void expect_clean(const WorkerOutcome& done) {
    EXPECT_FALSE(done.forged) << *done.forged;
    EXPECT_FALSE(done.report.failure) << name_of(done.report.failure->stage) << ": " << done.report.failure->message;
    EXPECT_TRUE(done.report.ended) << done.process.describe() << "\n" << done.process.output;
    EXPECT_TRUE(done.process.ok()) << done.process.describe() << "\n" << done.process.output;
  }

  static std::vector<float> checked_y(const WorkerOutcome& done) {
    if (!done.report.checked) return {};
    return values_of<float>((*done.report.checked)[0]);
  }

  std::mt19937 random_{20250101};
  std::vector<float> x_, z_;
};

std::vector<std::pair<std::string, std::string>> read_address_log(const fs::path& file) {
  std::vector<std::pair<std::string, std::string>> calls;
  std::ifstream in(file);
  std::string x, y;
  while (in >> x >> y) calls.emplace_back(x, y);
  return calls;
}

}  // namespace

TEST_F(Worker, RunsACorrectSolutionWithWorkspacePrepareAndTiming) {
  WorkerRequest request = axpy_request(built("axpy.cpp"));
  time_exactly(request, 3);
  const WorkerOutcome done = run_worker(request, axpy_draw());
  expect_clean(done);
  EXPECT_TRUE(done.report.guard_violations.empty());
  EXPECT_EQ(checked_y(done), axpy(x_, z_));
  ASSERT_TRUE(done.report.timing);
  EXPECT_EQ(done.report.timing->samples_ms.size(), 3u);
  for (double ms : done.report.timing->samples_ms) EXPECT_GT(ms, 0.0);
  EXPECT_EQ(done.report.timing->calls, 4);  // one warm-up call, three timed ones
  EXPECT_FALSE(done.report.device_name.empty());
  // The outside clock: marks around the loop with nothing called and around the timed calls.
  ASSERT_TRUE(done.report.noop_seconds);
  ASSERT_TRUE(done.report.timed_seconds);
  ASSERT_TRUE(done.report.noop_after_seconds) << "the loop with nothing called again, after the timed calls";
  EXPECT_GT(done.report.timing->noop_samples, 0);
  std::cout << "outside clock: " << *done.report.noop_seconds * 1e3 / done.report.timing->noop_samples
            << " ms per call with nothing called, " << *done.report.timed_seconds * 1e3 / 3 << " ms per timed call\n";
}

// The evaluator computes its oracles once the worker has its draws; the worker waits for them at its first
// clock mark, and that wait is in no clock's interval.
TEST_F(Worker, WaitsForTheCallerAtItsFirstClockMarkOutsideEveryTimedInterval) {
  WorkerRequest request = axpy_request(built("axpy.cpp"));
  time_exactly(request, 3);
  int called = 0;
  const auto started = std::chrono::steady_clock::now();
  double waited_at = 0;
  const WorkerOutcome done = run_worker(request, axpy_draw(), {}, 60, [&] {
    ++called;
    waited_at = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
  });
  expect_clean(done);
  EXPECT_EQ(called, 1);
  EXPECT_GT(waited_at, 0.0);
  EXPECT_EQ(checked_y(done), axpy(x_, z_));
  ASSERT_TRUE(done.report.noop_seconds);
  ASSERT_TRUE(done.report.timed_seconds);
  EXPECT_LT(*done.report.noop_seconds, 0.3);
  EXPECT_LT(*done.report.timed_seconds, 0.3);
  // The wait is the harness's, before the loop with nothing called: it shows in that step's phase.
  double noop_phase = 0;
  for (const auto& phase : done.report.phases)
    if (phase.name == "worker_noop_timing") noop_phase = phase.seconds;
  EXPECT_GE(noop_phase, 0.39);
}

TEST_F(Worker, EveryTimedCallComputesFromItsOwnPatchedInputs) {
  WorkerRequest request = axpy_request(built("axpy.cpp"));
  time_exactly(request, 6);
  request.sampled_calls = 100;  // keep every call
  const WorkerOutcome done = run_worker(request, axpy_draw());
  expect_clean(done);
  ASSERT_EQ(done.report.timed.size(), 7u);
  std::set<std::vector<float>> distinct;
  for (const auto& timed : done.report.timed) {
    const auto y = values_of<float>(timed.outputs[0]);
    EXPECT_EQ(y, axpy_of_call(request, timed.call)) << "call " << timed.call;
    EXPECT_NE(y, axpy(x_, z_)) << "call " << timed.call << " saw the checked call's inputs";
    distinct.insert(y);
  }
  EXPECT_EQ(distinct.size(), 7u) << "two timed calls saw the same inputs";
}

TEST_F(Worker, TheOutputsOfAFewTimedCallsChosenAfterTheFactComeBackWithTheLast) {
  WorkerRequest request = axpy_request(built("axpy.cpp"));
  time_exactly(request, 20);
  request.sampled_calls = 2;
  std::set<int64_t> seen;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    request.sample_seed = seed;
    const WorkerOutcome done = run_worker(request, axpy_draw());
    expect_clean(done);
    ASSERT_GE(done.report.timed.size(), 2u);
    ASSERT_LE(done.report.timed.size(), 3u);
    EXPECT_EQ(done.report.timed.back().call, 20);  // the last of one warm-up and twenty timed calls
    for (const auto& timed : done.report.timed) {
      seen.insert(timed.call);
      EXPECT_EQ(values_of<float>(timed.outputs[0]), axpy_of_call(request, timed.call));
    }
  }
  EXPECT_GT(seen.size(), 4u) << "the kept calls do not depend on the sample seed";
}

TEST_F(Worker, InPlaceOutputsShareTheInputAndIntScalarsArriveAsInts) {
  std::uniform_int_distribution<int32_t> values(-1000, 1000);
  std::vector<int32_t> x(1000);
  for (int32_t& v : x) v = values(random_);
  WorkerRequest request;
  request.library = built("scale_inplace.cpp").string();
  request.device = Device::cpu;
  request.inputs = {tensor("x", DType::i32, {10, 100}, {100, 1})};
  request.outputs = {tensor("x", DType::i32, {10, 100}, {100, 1})};
  request.outputs[0].inplace = true;
  request.scalars = {WireScalar{"factor", true, 3.0}};
  time_exactly(request, 4);
  request.sampled_calls = 100;
  const WorkerOutcome done = run_worker(request, {bytes_of(x)});
  expect_clean(done);
  std::vector<int32_t> tripled(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) tripled[i] = 3 * x[i];
  EXPECT_EQ(values_of<int32_t>((*done.report.checked)[0]), tripled);
  // Each timed call multiplies x in place: every one of them starts from the restored input.
  ASSERT_EQ(done.report.timed.size(), 5u);
  for (const auto& timed : done.report.timed) EXPECT_EQ(values_of<int32_t>(timed.outputs[0]), tripled) << timed.call;
}

TEST_F(Worker, TheSolutionsErrorMessageComesBack) {
  WorkerRequest request = axpy_request(built("reports_error.cpp"));
  request.time = true;
  const WorkerOutcome done = run_worker(request, axpy_draw());
  EXPECT_TRUE(done.process.ok()) << done.process.output;
  EXPECT_FALSE(done.forged);
  ASSERT_TRUE(done.report.failure);
  EXPECT_EQ(done.report.failure->status, WorkerStatus::runtime_error);
  EXPECT_EQ(done.report.failure->stage, Stage::run);
  EXPECT_NE(done.report.failure->message.find("unsupported rank 2"), std::string::npos) << done.report.failure->message;
  EXPECT_NE(done.report.failure->message.find("returned 7"), std::string::npos) << done.report.failure->message;
  EXPECT_FALSE(done.report.timing);
  EXPECT_TRUE(done.report.ended);
}

TEST_F(Worker, WritesOutsideTheOutputAreReportedAsGuardViolations) {
  const WorkerOutcome done = run_axpy(axpy_request(built("writes_past_output.cpp")));
  expect_clean(done);
  std::map<std::string, int64_t> sides;
  for (const auto& violation : done.report.guard_violations) {
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
  const WorkerOutcome done = run_axpy(axpy_request(built("writes_nothing.cpp")));
  expect_clean(done);
  const auto y = values_of<uint32_t>((*done.report.checked)[0]);
  ASSERT_EQ(y.size(), 24u);
  for (uint32_t bits : y) EXPECT_EQ(bits, 0xFFFFFFFFu);
}

TEST_F(Worker, AReplayOfAnEarlierCallLeavesTheTimedCallsOutputsWrong) {
  WorkerRequest request = axpy_request(built("computes_once.cpp"));
  time_exactly(request, 5);
  request.sampled_calls = 100;
  const WorkerOutcome done = run_worker(request, axpy_draw());
  expect_clean(done);
  EXPECT_EQ(checked_y(done), axpy(x_, z_));
  ASSERT_EQ(done.report.timed.size(), 6u);
  for (const auto& timed : done.report.timed) {
    for (uint32_t bits : values_of<uint32_t>(timed.outputs[0])) EXPECT_EQ(bits, 0xFFFFFFFFu) << timed.call;
  }
}

TEST_F(Worker, AWrongResultInAnyTimedCallComesBackWhenKept) {
  WorkerRequest request = axpy_request(built("wrong_on_third_call.cpp"));
  time_exactly(request, 6);
  request.sampled_calls = 100;
  const WorkerOutcome done = run_worker(request, axpy_draw());
  expect_clean(done);
  for (const auto& timed : done.report.timed) {
    auto want = axpy_of_call(request, timed.call);
    if (timed.call == 1) want[0] += 1.0f;  // the third call overall: the checked call, warm-up 0, then this
    EXPECT_EQ(values_of<float>(timed.outputs[0]), want) << timed.call;
  }
}

TEST_F(Worker, ACrashEndsTheProcessByItsSignalWithNoEnd) {
  const WorkerOutcome done = run_axpy(axpy_request(built("segfaults.cpp")));
  EXPECT_EQ(done.process.end, ProcessResult::End::signaled) << done.process.describe();
  EXPECT_EQ(done.process.signal, SIGSEGV);
  EXPECT_FALSE(done.forged);
  EXPECT_FALSE(done.report.ended);
  EXPECT_EQ(done.report.reached, Stage::run);
}

TEST_F(Worker, AHangIsEndedByTheTimeout) {
  const WorkerOutcome done = run_axpy(axpy_request(built("hangs.cpp")), {}, 1.0);
  EXPECT_EQ(done.process.end, ProcessResult::End::timed_out);
  EXPECT_FALSE(done.report.ended);
}

// The checked call's outputs went out before timing began: a hang while timing leaves them.
TEST_F(Worker, AHangWhileTimingLeavesTheCheckedOutputs) {
  WorkerRequest request = axpy_request(built("hangs_when_timed.cpp"));
  request.time = true;
  const WorkerOutcome done = run_worker(request, axpy_draw(), {}, 2.0);
  EXPECT_EQ(done.process.end, ProcessResult::End::timed_out);
  EXPECT_FALSE(done.forged);
  EXPECT_EQ(done.report.reached, Stage::timing);
  EXPECT_FALSE(done.report.timing);
  EXPECT_EQ(checked_y(done), axpy(x_, z_));
}

TEST_F(Worker, ALibraryWithoutTheEntryPointFailsToLoad) {
  WorkerOutcome done = run_axpy(axpy_request(built("no_entry_point.cpp")));
  EXPECT_TRUE(done.process.ok()) << done.process.output;
  ASSERT_TRUE(done.report.failure);
  EXPECT_EQ(done.report.failure->status, WorkerStatus::runtime_error);
  EXPECT_EQ(done.report.failure->stage, Stage::load);
  EXPECT_NE(done.report.failure->message.find("d2k_run"), std::string::npos) << done.report.failure->message;

  done = run_axpy(axpy_request(scratch_root() / "no-such-library.so"));
  ASSERT_TRUE(done.report.failure);
  EXPECT_EQ(done.report.failure->stage, Stage::load);
  EXPECT_NE(done.report.failure->message.find("no-such-library.so"), std::string::npos) << done.report.failure->message;
}

TEST_F(Worker, ABadRequestEndsWithAMessageAndNoEvidence) {
  WorkerRequest request = axpy_request(built("axpy.cpp"));
  request.inputs[1].strides = {1};  // z is 4x6
  const WorkerOutcome done = run_worker(request, axpy_draw());
  EXPECT_EQ(done.process.end, ProcessResult::End::exited);
  EXPECT_EQ(done.process.exit_code, 2);
  EXPECT_NE(done.process.output.find("bad request: field 'inputs': tensor 'z': 1 strides for 2 dimensions"),
            std::string::npos)
      << done.process.output;
  EXPECT_TRUE(done.report.frames.empty());

  ProcessSpec spec;
  spec.argv = {D2K_WORKER_PATH, "request.json"};
  const ProcessResult usage = run_process(spec);
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_NE(usage.output.find("usage"), std::string::npos);
}

// The draws come after the worker's set-up: draws that do not fit the inputs file end it there, before
// anything of the solution's is loaded.
TEST_F(Worker, DrawsThatDoNotFitTheInputsFileEndTheWorkerBeforeTheSolutionLoads) {
  WorkerRequest request = axpy_request(built("axpy.cpp"));
  auto draw = axpy_draw();
  draw[1].resize(92);  // z spans 96 bytes
  const WorkerOutcome done = run_worker(request, draw);
  EXPECT_EQ(done.process.end, ProcessResult::End::exited);
  EXPECT_EQ(done.process.exit_code, 2);
  EXPECT_NE(done.process.output.find("bad draws: input 'z' of draw 1: 96 bytes at 120 of an inputs file of 212"),
            std::string::npos)
      << done.process.output;
  EXPECT_EQ(done.report.reached, Stage::draws);
  EXPECT_FALSE(done.report.checked);
}

// The worker starts and sets up while its draws are made: draws that come late reach it whole, and the
// wait shows in its own phase, after its set-up.
TEST_F(Worker, SetsUpWhileItsDrawsAreMadeAndWaitsForThemAfter) {
  WorkerRequest request = axpy_request(built("axpy.cpp"));
  time_exactly(request, 3);
  request.second_draw = false;
  const std::vector<std::string> draw = axpy_draw();
  const WorkerLaunch launch{.worker = D2K_WORKER_PATH, .scratch_dir = scratch_root(), .timeout_seconds = 60};
  int taken = 0;
  const WorkerOutcome done = d2k::run_worker(launch, request, [&] {
    ++taken;
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    return DrawPair{DrawBytes(draw.begin(), draw.end()), {}};
  });
  expect_clean(done);
  EXPECT_EQ(taken, 1);
  EXPECT_EQ(checked_y(done), axpy(x_, z_));
  std::vector<std::string> names;
  for (const auto& phase : done.report.phases) names.push_back(phase.name);
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 3),
            (std::vector<std::string>{"worker_setup", "worker_draws", "worker_noop_timing"}));
  // The worker had set up and was waiting for its draws while they were made.
  EXPECT_GE(done.report.phases[1].seconds, 0.3) << "worker_setup " << done.report.phases[0].seconds;
}

// The worker maps its inputs file only once the file is sealed: one still open to writes is refused, so
// the worker can never read draws that are still being written.
TEST_F(Worker, AnInputsFileNotSealedIsRefused) {
  WorkerRequest request = axpy_request(built("axpy.cpp"));
  request.second_draw = false;
  request.token = token_hex(Token{1, 2, 3});
  const int file = ::memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(file, 0);
  const std::string bytes = bytes_of(x_) + bytes_of(z_);
  ASSERT_EQ(::write(file, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  // The control stream as the runner writes it, but for the seals.
  class Control : public ProcessConversation {
   public:
    explicit Control(std::string frames) : frames_(std::move(frames)) {}
    std::string_view next_input() override { return std::string_view(frames_).substr(sent_); }
    void input_written(std::size_t bytes) override { sent_ += bytes; }
    void received(const char*, std::size_t, double) override {}

   private:
    std::string frames_;
    std::size_t sent_ = 0;
  };
  std::string frames = encode_frame(FrameKind::request, 0, Token{}, nlohmann::json(request).dump());
  for (std::size_t i = 0; i < 2; ++i) {
    const nlohmann::json fields = {{"draw", 1}, {"input", i}, {"offset", i == 0 ? 0 : x_.size() * 4}};
    frames += encode_frame(FrameKind::input, i + 1, Token{}, fields.dump());
  }
  Control control(std::move(frames));
  ProcessSpec spec;
  spec.argv = {D2K_WORKER_PATH};
  spec.cwd = scratch_root();
  spec.timeout_seconds = 60;
  spec.inherit = {{file, kChildInputsFd}};
  const ProcessResult ended = run_process(spec, &control);
  ::close(file);
  EXPECT_EQ(ended.exit_code, 2) << ended.describe() << "\n" << ended.output;
  EXPECT_NE(ended.output.find("bad draws: the inputs file is not sealed against writes"), std::string::npos)
      << ended.output;
}

TEST_F(Worker, AThreadLeftRunningAfterTheCallIsRejected) {
  const WorkerOutcome done = run_axpy(axpy_request(built("leaves_thread.cpp")));
  ASSERT_TRUE(done.report.failure) << done.process.output;
  EXPECT_EQ(done.report.failure->status, WorkerStatus::rejected);
  EXPECT_EQ(done.report.failure->stage, Stage::run);
  EXPECT_NE(done.report.failure->message.find("thread(s) running after d2k_run returned"), std::string::npos)
      << done.report.failure->message;
}

TEST_F(Worker, ThreadsJoinedWithinTheCallAreAllowedEvenWhileTimed) {
  WorkerRequest request = axpy_request(built("joins_threads.cpp"));
  time_exactly(request, 20);
  const WorkerOutcome done = run_worker(request, axpy_draw());
  expect_clean(done);
  ASSERT_TRUE(done.report.timing);
  EXPECT_EQ(done.report.timing->samples_ms.size(), 20u);
}

TEST_F(Worker, TheSecondDrawRunsFirstAndIsRepeatedInTheSameBuffers) {
  WorkerRequest request = axpy_request(built("axpy.cpp"));
  request.deterministic = true;
  const auto first = axpy_draw();
  const auto x1 = x_, z1 = z_;
  std::vector<float> x2 = x_, z2 = z_;
  x2[9] += 1.0f;
  z2[17] -= 2.0f;
  const WorkerOutcome done = run_worker(request, first, {bytes_of(x2), bytes_of(z2)});
  expect_clean(done);
  EXPECT_EQ(checked_y(done), axpy(x1, z1));
  ASSERT_TRUE(done.report.second);
  EXPECT_EQ(values_of<float>((*done.report.second)[0]), axpy(x2, z2));
  // The inputs came back unchanged, as digests with the evaluation's key.
  const auto digest = [&](const std::vector<float>& v) { return keyed_digest(request.digest_key, v.data(), v.size() * 4); };
  EXPECT_EQ(done.report.digests.at(std::string(kDigestInputsSecond)), (std::vector<uint64_t>{digest(x2), digest(z2)}));
  EXPECT_EQ(done.report.digests.at(std::string(kDigestInputsChecked)), (std::vector<uint64_t>{digest(x1), digest(z1)}));
  // The repeat of the second draw: the same bytes, so the same digest.
  const auto second_y = (*done.report.second)[0];
  EXPECT_EQ(done.report.digests.at(std::string(kDigestRepeat)),
            (std::vector<uint64_t>{keyed_digest(request.digest_key, second_y.data(), second_y.size())}));
}

TEST_F(Worker, ARepeatThatDiffersGivesAnotherDigest) {
  WorkerRequest request = axpy_request(built("computes_once.cpp"));
  request.deterministic = true;
  const WorkerOutcome done = run_worker(request, axpy_draw(), axpy_draw());
  expect_clean(done);
  const auto second_y = (*done.report.second)[0];
  EXPECT_EQ(values_of<float>(second_y), axpy(x_, z_));
  EXPECT_NE(done.report.digests.at(std::string(kDigestRepeat)),
            (std::vector<uint64_t>{keyed_digest(request.digest_key, second_y.data(), second_y.size())}));
}

TEST_F(Worker, TimedCallsRotateThroughCopiesAtOtherAddresses) {
  WorkerRequest request = axpy_request(built("logs_addresses.cpp"));
  time_exactly(request, 7);
  request.timing.rotate_max_sets = 4;  // the cpu's cache would ask for more copies of these tiny tensors
  const fs::path log = scratch_root() / "addresses.txt";
  fs::remove(log);
  ::setenv("D2K_TEST_ADDRESS_LOG", log.c_str(), 1);
  WorkerOutcome done = run_worker(request, axpy_draw());
  ::unsetenv("D2K_TEST_ADDRESS_LOG");
  expect_clean(done);
  ASSERT_TRUE(done.report.timing);
  EXPECT_EQ(done.report.timing->rotation_sets, 4);
  EXPECT_EQ(done.report.timing->rotation_bytes, 4 * (30 + 24 + 24) * 4);  // x spans 30 floats, z and y 24

  const auto calls = read_address_log(log);
  ASSERT_EQ(calls.size(), 9u);  // the checked call, one warm-up call, seven timed ones
  std::set<std::string> xs, ys;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    xs.insert(calls[i].first);
    ys.insert(calls[i].second);
    if (i > 0) EXPECT_NE(calls[i].first, calls[i - 1].first) << "call " << i << " found x where call " << i - 1 << " did";
    if (i >= 4) EXPECT_EQ(calls[i].first, calls[i - 4].first) << "the copies are used in turn";
  }
  EXPECT_EQ(xs.size(), 4u);
  EXPECT_EQ(ys.size(), 4u);
  EXPECT_TRUE(done.report.guard_violations.empty());
  // Every copy's inputs, its last patch undone, are the first draw's.
  const auto digest = [&](const std::vector<float>& v) { return keyed_digest(request.digest_key, v.data(), v.size() * 4); };
  const auto& copies = done.report.digests.at(std::string(kDigestInputsCopies));
  ASSERT_EQ(copies.size(), 8u);
  for (std::size_t k = 0; k < copies.size(); ++k) EXPECT_EQ(copies[k], k % 2 == 0 ? digest(x_) : digest(z_)) << k;

  // Rotation off: one copy, every call at the same address.
  fs::remove(log);
  request.timing.rotate_cache_multiple = 0;
  ::setenv("D2K_TEST_ADDRESS_LOG", log.c_str(), 1);
  done = run_worker(request, axpy_draw());
  ::unsetenv("D2K_TEST_ADDRESS_LOG");
  expect_clean(done);
  EXPECT_EQ(done.report.timing->rotation_sets, 1);
  xs.clear();
  for (const auto& call : read_address_log(log)) xs.insert(call.first);
  EXPECT_EQ(xs.size(), 1u);
}

TEST_F(Worker, AnInputModifiedOnlyInARotatedCopyShowsInItsDigest) {
  WorkerRequest request = axpy_request(built("modifies_rotated_input.cpp"));
  time_exactly(request, 6);
  request.timing.rotate_max_sets = 3;
  const WorkerOutcome done = run_worker(request, axpy_draw());
  expect_clean(done);
  const auto digest_x = keyed_digest(request.digest_key, x_.data(), x_.size() * 4);
  EXPECT_EQ(done.report.digests.at(std::string(kDigestInputsChecked))[0], digest_x);
  const auto& copies = done.report.digests.at(std::string(kDigestInputsCopies));
  ASSERT_EQ(copies.size(), 6u);
  EXPECT_EQ(copies[0], digest_x);  // copy 0 is where the first call found x
  EXPECT_NE(copies[2], digest_x);
  EXPECT_NE(copies[4], digest_x);
}

TEST_F(Worker, TheReportSaysWhereTheWorkersTimeWent) {
  WorkerRequest request = axpy_request(built("axpy.cpp"));
  time_exactly(request, 3);
  const WorkerOutcome done = run_worker(request, axpy_draw(), axpy_draw());
  expect_clean(done);
  std::set<std::string> names;
  for (const auto& phase : done.report.phases) {
    names.insert(phase.name);
    EXPECT_GE(phase.seconds, 0.0) << phase.name;
  }
  for (const char* name : {"worker_setup", "worker_draws", "worker_noop_timing", "worker_load", "worker_prepare",
                           "worker_second_draw", "worker_run", "solution_timing", "worker_noop_call",
                           "worker_noop_timing_after", "worker_release"})
    EXPECT_TRUE(names.count(name)) << name;
}

// The solution shares the worker's process and could write on the evidence stream: the worker's seccomp
// filter refuses any write to it but the worker's own (the solution fails its call if its write is not
// refused with EPERM), and the evidence stays the worker's.
TEST_F(Worker, TheSolutionCannotWriteOnTheEvidenceStream) {
  for (const char* mode : {"garbage", "no-token"}) {
    ::setenv("D2K_TEST_FORGE", mode, 1);
    const WorkerOutcome done = run_axpy(axpy_request(built("writes_frames.cpp")));
    ::unsetenv("D2K_TEST_FORGE");
    expect_clean(done);
    EXPECT_EQ(checked_y(done), axpy(x_, z_)) << mode;
  }
}
