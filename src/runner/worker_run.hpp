// Running one worker (d2k-worker) on one request: the request goes to its stdin, the input draws follow
// once they are made (the worker starts and sets up meanwhile), its evidence comes back as frames on fd 3
// (core/worker_protocol.hpp), authenticated by the token and checked for order, and becomes a typed
// report. The runner owns the worker's process, its sandbox, ncu around it and the token; what the report
// means for the solution is the evaluator's business.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/trace.hpp"
#include "core/worker_protocol.hpp"
#include "runner/process.hpp"
#include "runner/sandbox.hpp"

namespace d2k {

// Nsight Compute around the worker, inside its sandbox (the agent's profile tool): ncu then launches the
// worker itself, so its injection needs nothing from outside the sandbox but its own installation,
// which is made visible read-only.
struct NcuWrap {
  std::filesystem::path ncu;                 // the ncu executable
  std::vector<std::string> args;             // its options before the worker's command line
  std::vector<std::filesystem::path> read;   // its installation, read-only in the sandbox
  std::filesystem::path report;              // where its report (--log-file) is copied after the run
};

struct WorkerLaunch {
  std::filesystem::path worker;       // the d2k-worker executable
  std::filesystem::path scratch_dir;  // the worker's working directory is a fresh folder in it
  std::optional<Sandbox> sandbox;     // its mode and launcher; worker_sandbox() adds the paths
  bool gpu = false;
  double timeout_seconds = 120;
  std::optional<NcuWrap> ncu;
  // Called once, when the worker first waits on a clock mark (before its first timed loop, always after
  // its draws were taken): the caller's own work meanwhile (the oracles, on the same GPU) must end there,
  // so that none of it overlaps a measurement. The worker waits; the mark's time is taken after. Must not
  // throw.
  std::function<void()> before_first_clock;
};

// The bytes of every input of one draw, in request order, laid out as the request's tensors say.
using DrawBytes = std::vector<std::string_view>;

// Both draws of a workload's inputs; `second` is empty when the request has no second draw.
struct DrawPair {
  DrawBytes first, second;
};

// Gives the draws to a worker that has started: called once, right after the request is in the worker's
// stdin, while the worker sets up (device, buffers), so it may block until the draws are made. The bytes
// it returns must stay alive until run_worker returns.
using TakeDraws = std::function<DrawPair()>;

// A timed call whose outputs came back: its index (WorkerRequest::patch_seed's call) and its outputs.
struct TimedOutputs {
  int64_t call = 0;
  std::vector<std::string_view> outputs;
};

// What the worker said, every frame authenticated. Views point into `frames`.
struct WorkerReport {
  std::string device_name;
  std::vector<Phase> phases;         // the worker's steps and their times
  std::optional<Stage> reached;      // the last step the worker began
  std::optional<WorkerFailure> failure;
  std::vector<GuardViolation> guard_violations;
  std::optional<std::vector<std::string_view>> second, checked;  // outputs, in request order
  std::vector<TimedOutputs> timed;
  std::vector<TimedOutputs> seeded;  // the seeded calls' outputs (a task with a sampled output), by call
  std::map<std::string, std::vector<uint64_t>, std::less<>> digests;  // by what they cover
  std::optional<TimingReport> timing;
  // The outside clock: the orchestrator's seconds between the worker's clock marks, and the worker's CPU
  // time between them by the kernel's accounting (nothing where the kernel does not keep it).
  std::optional<double> noop_seconds, timed_seconds, noop_after_seconds;
  std::optional<double> noop_cpu_seconds, timed_cpu_seconds, noop_after_cpu_seconds;
  bool ended = false;                // the worker's `end` frame arrived
  std::vector<Frame> frames;
};

struct WorkerOutcome {
  ProcessResult process;  // its output is the worker's log
  WorkerReport report;
  // Set when the evidence stream broke the protocol (a frame without the token, out of order, twice,
  // after the end, malformed): then nothing in the report can be trusted.
  std::optional<std::string> forged;
};

// Runs the worker on `request` (its token is set here, fresh) with the draws `take` gives: the first and,
// when request.second_draw, the second. Never throws for what the worker or the solution does; throws
// d2k::Error when the worker cannot be started at all for a reason of the harness's own. What `take`
// throws is rethrown once the worker has ended (it got no draws, and stopped).
WorkerOutcome run_worker(const WorkerLaunch& launch, WorkerRequest request, const TakeDraws& take);
// The same with draws already made; the caller keeps them alive while the worker runs.
WorkerOutcome run_worker(const WorkerLaunch& launch, WorkerRequest request, const DrawBytes& first,
                         const DrawBytes& second);

// A fresh unpredictable 64-bit value (keys, seeds, tokens).
uint64_t random_u64();

}  // namespace d2k
