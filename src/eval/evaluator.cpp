#include "eval/evaluator.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <thread>

#include "core/error.hpp"
#include "core/expr.hpp"
#include "core/file_bytes.hpp"
#include "core/keyed_digest.hpp"
#include "core/metrics.hpp"
#include "core/overhead.hpp"
#include "core/text.hpp"
#include "core/timestamp.hpp"
#include "eval/baselines.hpp"
#include "eval/checks.hpp"
#include "reference/inputs.hpp"
#include "reference/oracle.hpp"
#include "reference/task_code.hpp"
#include "reference/tensors.hpp"
#include "reference/torch_device.hpp"
#include "runner/triton.hpp"
#include "timing/rotation.hpp"
#include "timing/stats.hpp"
#include "timing/timer.hpp"

namespace d2k {
namespace {

constexpr std::size_t kLogCap = 16 * 1024;

std::string cap(const std::string& log) { return cap_text(log, kLogCap); }

// The seed of the second draw: another draw than the first for every seed, known only here.
uint64_t second_seed(uint64_t seed) { return (seed ^ 0x9E3779B97F4A7C15ULL) * 0xBF58476D1CE4E5B9ULL + 1; }

// The float64 oracle of one draw of the inputs, left on the device it was computed on: the check runs
// there too (on a GPU in milliseconds; copying a 67 M-element float64 oracle to the host and checking it
// there cost seconds per workload). The GPU memory is this process's, out of the worker's reach.
TensorMap oracle_of(const Task& task, const TaskCode& code, const TensorMap& inputs, const Scalars& scalars,
                    Device device) {
  auto placed = place_inputs(inputs, device, Precision::oracle);
  return call_oracle(task, code, placed, scalars);
}

// The oracles of the first draw: placed once at the oracle's precision (on the GPU, the costly part for
// large inputs), then the unpatched draw's and each kept timed call's, its patch applied to a copy.
class FirstDrawOracles {
 public:
  FirstDrawOracles(const Task& task, const TaskCode& code, const Scalars& scalars, const TensorMap& first,
                   Device device, const WorkerRequest& request)
      : task_(task), code_(code), scalars_(scalars), request_(request),
        placed_(place_inputs(first, device, Precision::oracle)) {}

  TensorMap unpatched() const {
    TensorMap inputs = copy();
    return call_oracle(task_, code_, inputs, scalars_);
  }

  TensorMap operator()(int64_t call) const {
    TensorMap inputs = copy();
    apply_patch(task_, inputs, call_patch(request_.patch_seed, call, request_.inputs, request_.patch_swaps));
    return call_oracle(task_, code_, inputs, scalars_);
  }

 private:
  // A reference may update an in-place input: each call gets its own copy, with the placed strides (a
  // clone of a tensor with gaps, a packed view, comes back contiguous, and a call's patch, computed with
  // the task's strides, would land elsewhere or out of bounds).
  TensorMap copy() const {
    TensorMap inputs;
    for (const auto& [name, tensor] : placed_)
      inputs[name] = at::empty_strided(tensor.sizes(), tensor.strides(), tensor.options()).copy_(tensor);
    return inputs;
  }

  const Task& task_;
  const TaskCode& code_;
  const Scalars& scalars_;
  const WorkerRequest& request_;
  TensorMap placed_;
};

// Every oracle the check needs but the kept timed calls': the first draw's (placed once) and the second's.
struct Oracles {
  FirstDrawOracles first;
  TensorMap want, second_want;
};

Oracles compute_oracles(const Task& task, const TaskCode& code, const Scalars& scalars, const TensorMap& first,
                        const TensorMap& second, Device device, const WorkerRequest& request) {
  FirstDrawOracles first_oracles(task, code, scalars, first, device, request);
  TensorMap want = first_oracles.unpatched();
  TensorMap second_want = oracle_of(task, code, second, scalars, device);
  return Oracles{std::move(first_oracles), std::move(want), std::move(second_want)};
}

// The two draws of one workload's inputs: the first, and a second a few elements away from it, run first
// in the same buffers (outputs that follow the buffers' addresses or a sampled fingerprint rather than
// the contents show).
struct Draws {
  TensorMap first, second;
};

Draws draw_inputs(const Task& task, const Workload& workload, uint64_t seed) {
  const auto code = make_task_code(task.name);
  Draws draws;
  draws.first = make_inputs(task, *code, workload, seed);
  draws.second = make_second_inputs(task, *code, workload, draws.first, second_seed(seed));
  return draws;
}

using Step = std::function<void(const char* what, const char* phase)>;
// A step for the observer alone, inside a phase that goes on (the worker's).
using Note = std::function<void(const char* what)>;

// The oracles start as soon as the worker has its draws. On cuda they are computed in a thread while the
// worker goes on (its uploads take about as long), and the worker waits for them at its first clock mark
// (run_worker's before_first_clock): no oracle work overlaps a measurement, and a wait shows in
// worker_noop_timing. On the cpu device they are computed before the worker gets its draws (a wait that
// shows in worker_draws): their threads would take the CPUs the worker's calls run on. The arguments
// must outlive the future.
std::future<Oracles> start_oracles(const Task& task, const TaskCode& code, const Scalars& scalars, const TensorMap& first,
                                   const TensorMap& second, Device device, const WorkerRequest& request, const Note& note) {
  auto compute = [&task, &code, &scalars, &first, &second, device, &request] {
    return compute_oracles(task, code, scalars, first, second, device, request);
  };
  if (device == Device::cuda) return std::async(std::launch::async, compute);
  note("oracle");
  std::promise<Oracles> computed;
  computed.set_value(compute());
  return computed.get_future();
}

struct BaselineTimes {
  std::optional<TimingSummary> eager, library;
  std::string library_refused;  // why the library path cannot run the workload, when it cannot
};

// The eager baseline's time and the library's, when the settings ask for them (each timed once per
// process and workload: `cache`).
BaselineTimes time_baselines(const Task& task, const Workload& workload, const TaskCode& code, const TensorMap& first,
                             const Scalars& scalars, const EvalEnvironment& environment, const EvalSettings& settings,
                             std::map<std::string, TimingSummary>& cache, const Step& step) {
  BaselineTimes times;
  if (!settings.baseline) return times;
  step("timing the eager baseline", kBaselineTimingPhase);
  times.eager = baseline_time(task, workload, code, first, scalars, environment.device, settings.timing, cache);
  if (code.has_library()) {
    step("timing the library path", kBaselineTimingPhase);
    auto library = library_time(task, workload, code, first, scalars, environment.device, settings.timing, cache);
    times.library = library.summary;
    times.library_refused = library.refused;
  }
  return times;
}

// What the worker's run tells the trace, whatever the verdict: its log, the device, the clocks.
void record_worker(Trace& trace, const WorkerOutcome& outcome) {
  trace.log = cap(outcome.process.output);
  if (!outcome.report.device_name.empty()) trace.device_name = outcome.report.device_name;
  if (outcome.report.timing) trace.clocks = outcome.report.timing->clocks;
  trace.outside_clock = outside_clock_of(outcome.report);
  trace.second_clock = second_clock_of(outcome.report);
}

WireTensor wire(const Task& task, const TensorSpec& spec, const Workload& workload) {
  const auto geometry = geometry_of(spec, workload);
  return WireTensor{.name = spec.name,
                    .dtype = spec.dtype,
                    .shape = geometry.shape,
                    .strides = geometry.strides,
                    .inplace = spec.inplace,
                    .prepare = spec.prepare,
                    .perturb = spec.perturb,
                    .relabel = relabel_block_of(task, spec, workload)};
}

// What the worker is asked to do for one workload; the token is the runner's to add.
// How many timed calls, chosen after the fact, come back besides the last. Each one's outputs cross the
// pipe and get an oracle of their own, so large outputs keep one or two; small ones up to 16, which a
// solution that computes only some of its calls cannot hope to slip past (every other call: 2^-17).
constexpr std::size_t kKeptOutputBytes = std::size_t{64} << 20;
constexpr int kMostSampledCalls = 16;

int sampled_calls(const std::vector<WireTensor>& outputs) {
  std::size_t bytes = 0;
  for (const auto& output : outputs) bytes += span_bytes(output);
  if (bytes > kKeptOutputBytes) return 1;
  return static_cast<int>(std::clamp<std::size_t>(kKeptOutputBytes / std::max<std::size_t>(bytes, 1), 2, kMostSampledCalls));
}


// Unpredictable for the solution, known here: the digests' key, the timed calls' patches, which timed
// calls come back, the seeded calls' seeds.
void refresh_secrets(WorkerRequest& request) {
  request.digest_key = random_u64();
  request.patch_seed = random_u64();
  request.sample_seed = random_u64();
  if (request.seeded_calls > 0) request.seed_key = random_u64();
}

WorkerRequest request_for(const Task& task, const Workload& workload, const BuildResult& build,
                          const EvalEnvironment& environment, const EvalSettings& settings) {
  WorkerRequest request;
  request.library = std::filesystem::absolute(build.library).string();
  request.device = environment.device;
  request.time = settings.time;
  request.timing = settings.timing;
  request.deterministic = task.deterministic;
  for (const auto& spec : task.inputs) request.inputs.push_back(wire(task, spec, workload));
  for (const auto& spec : task.outputs) request.outputs.push_back(wire(task, spec, workload));
  for (const auto& [spec, value] : scalars_of(task, workload)) request.scalars.push_back({spec->name, spec->is_int, value});
  request.sampled_calls = sampled_calls(request.outputs);
  if (const TensorSpec* sampled = task.sampled_output()) {
    request.seeded_calls = static_cast<int>(evaluate(sampled->tolerance.calls, workload.axes));
    request.seed_scalar = sampled->tolerance.seed;
  }
  refresh_secrets(request);
  return request;
}

WorkerLaunch launch_for(const EvalEnvironment& environment, const EvalSettings& settings) {
  return WorkerLaunch{.worker = environment.worker,
                      .scratch_dir = environment.scratch_dir,
                      .sandbox = environment.sandbox,
                      .gpu = environment.device == Device::cuda,
                      .timeout_seconds = settings.worker_timeout_seconds,
                      .ncu = settings.ncu};
}

// The raw bytes of every input of a draw (laid out on the CPU), in the task's order.
DrawBytes bytes_of(const Task& task, const TensorMap& draw) {
  DrawBytes bytes;
  for (const auto& spec : task.inputs) bytes.push_back(span_view(draw.at(spec.name)));
  return bytes;
}

// The digests of the read-only inputs of a draw, as the worker sends them.
std::vector<uint64_t> input_digests(const Task& task, const TensorMap& draw, uint64_t key) {
  std::vector<uint64_t> digests;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  for (const auto& spec : task.inputs) {
    if (const auto* out = task.find_output(spec.name); out && out->inplace) continue;
    const auto bytes = span_view(draw.at(spec.name));
    digests.push_back(keyed_digest(key, bytes.data(), bytes.size(), threads));
  }
  return digests;
}

// Speed against the baseline and the ceilings, and what a person should know about the time.
void add_performance(Trace& trace, const Task& task, const Workload& workload, const TimingReport& timing,
                     const std::optional<TimingSummary>& baseline, const std::optional<TimingSummary>& library,
                     const EvalEnvironment& environment) {
  const double flops = flops_of(task, workload), min_bytes = min_bytes_of(task, workload);
  const auto summary = summarize(timing.samples_ms);
  trace.performance = performance_of(summary, baseline, flops, min_bytes, environment.ceilings, task.flops_dtype);
  trace.performance->rotation_sets = timing.rotation_sets;
  trace.performance->rotation_bytes = timing.rotation_bytes;
  add_library(*trace.performance, library);
  const auto light = faster_than_light(summary.median_ms, flops, min_bytes, environment.ceilings, task.flops_dtype,
                                       environment.device, timing.rotation_sets, timing.rotation_bytes);
  if (light.warning) trace.warnings.push_back(*light.warning);
  if (trace.clocks && trace.clocks->throttled) trace.warnings.push_back(trace.clocks->warning);
  if (timing.second_clock && !timing.second_clock->available)
    trace.warnings.push_back("the second clock (CUPTI) could not run: " + timing.second_clock->unavailable);
}

}  // namespace

// A Triton solution's kernels, compiled for this workload before its worker starts (runner/triton.hpp);
// the request then tells the worker where Python, Triton and the compiled kernels are. A failure is the
// trace's status and message.
std::optional<std::pair<Status, std::string>> Evaluator::triton_warmup_for(const Solution& solution, const BuildResult& build,
                                                                          WorkerRequest& request, std::string& summary) {
  std::string why;
  const auto setup = find_triton(environment_.root, why);
  if (!setup) return std::pair{Status::runtime_error, "no usable Triton: " + why};
  if (setup->libpython.empty())
    return std::pair{Status::runtime_error, fmt::format("{} has no shared libpython, which the worker embeds to run a "
                                                        "Triton solution", setup->python.string())};
  const std::filesystem::path entry = build.library.parent_path();
  const auto manifest = nlohmann::json::parse(file_bytes(build.library).value_or("{}"));
  WarmupSpec spec;
  spec.src_dir = entry / "src";
  spec.entry = manifest.at("entry").get<std::string>();
  spec.modules = manifest.at("modules").get<std::vector<std::string>>();
  spec.inputs = request.inputs;
  spec.outputs = request.outputs;
  spec.scalars = request.scalars;
  spec.cache_dir = entry / "triton-cache";
  spec.scratch_dir = environment_.scratch_dir / fmt::format("warmup-{:016x}", random_u64());
  spec.build_stubs = environment_.device == Device::cuda;
  spec.timeout_seconds = settings_.build_timeout_seconds;
  spec.sandbox = environment_.sandbox;
  const WarmupResult warm = triton_warmup(*setup, spec);
  std::error_code ignored;
  std::filesystem::remove_all(spec.scratch_dir, ignored);
  if (!warm.ok) {
    const std::string message = fmt::format("Triton warm-up: {}", warm.message);
    if (warm.kind == "refused") return std::pair{Status::rejected, message};
    if (warm.kind == "compile" || warm.message.find("SyntaxError") != std::string::npos)
      return std::pair{Status::compile_error, message};
    if (warm.kind == "harness") return std::pair{Status::runtime_error, message + "\n" + cap(warm.log)};
    return std::pair{Status::runtime_error, message};
  }
  request.python = wire_python(*setup, spec);
  std::vector<std::string> kernels;
  for (const auto& kernel : warm.kernels)
    kernels.push_back(fmt::format("{} ({}, {} warps)", kernel.value("kernel", "?"), kernel.value("hash", "").substr(0, 12),
                                  kernel.value("num_warps", 0)));
  summary = fmt::format("d2k: Triton {} warm-up: {} kernel(s) for sm_90a in {:.1f} s: {}\n", setup->version, kernels.size(),
                        warm.seconds, fmt::join(kernels, ", "));
  return std::nullopt;
}

// One workload's input draws (on the CPU, seconds for the large ones), made in a thread from just before its
// worker is launched: the worker starts and sets up meanwhile, and gets its draws, and so runs a clock, only
// once they are made. Taken once: when the first worker is ready for them, or after it when it ended before;
// a draw's error is rethrown there, as it would be made there. (Drawing the next workload's inputs while
// this one was checked ran two of ATen's parallel regions at once, the check's and the draw's: on the H200's
// 16-core host the check of llama3-8b-T2048 took 0.21 s instead of its own 0.07, docs/results/
// 2026-12-03-h200-session13.md.)
class WorkloadDraws {
 public:
  WorkloadDraws(const Task& task, const Workload& workload, uint64_t seed)
      : making_(std::async(std::launch::async, [&task, &workload, seed] { return draw_inputs(task, workload, seed); })) {}
  WorkloadDraws(const WorkloadDraws&) = delete;
  WorkloadDraws& operator=(const WorkloadDraws&) = delete;
  // (A future of std::async waits in its destructor: an evaluation that ends early still ends after its draw.)

  const Draws& get() {
    if (!drawn_) drawn_ = making_.get();
    return *drawn_;
  }

 private:
  std::future<Draws> making_;
  std::optional<Draws> drawn_;
};

Evaluator::Evaluator(const EvalEnvironment& environment, EvalSettings settings, EvalObserver* observer)
    : environment_(environment), settings_(std::move(settings)), observer_(observer) {}

std::vector<Trace> Evaluator::evaluate(const Task& task, const Solution& solution) {
  const auto workloads = select_workloads(task, settings_.workloads, settings_.include_hidden, settings_.tier);
  if (!make_task_code(task.name)) fail("task {} has no compiled-in reference ({}/reference.cpp)", task.name, task.dir.string());
  require_torch_device(environment_.device);

  const auto build_options = solution_build_options(environment_, solution, settings_.build_timeout_seconds);
  if (observer_) observer_->building(task, solution);
  const auto build = build_solution(solution, build_options);
  if (observer_) observer_->built(task, build);

  std::vector<Trace> traces;
  int index = 0;
  for (const auto* workload : workloads) {
    const auto started = std::chrono::steady_clock::now();
    phases_ = PhaseClock();
    traces.push_back(
        evaluate_workload(task, *workload, solution, build, ++index, static_cast<int>(workloads.size())));
    phases_.stop();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
    traces.back().phases = phases_.phases();
    traces.back().wall_seconds = took.count();
    if (observer_) observer_->finished({task, *workload, index, static_cast<int>(workloads.size()), took.count()}, traces.back());
  }
  return traces;
}

Trace Evaluator::evaluate_workload(const Task& task, const Workload& workload, const Solution& solution,
                                   const BuildResult& build, int index, int count) {
  Trace trace{.task = task.name, .workload = workload.name, .solution = solution.name, .device = environment_.device,
              .seed = settings_.seed, .device_name = environment_.device_name, .timestamp = utc_timestamp()};
  // Each step says how long the workload has taken so far: the harness's own cost shows.
  const auto started = std::chrono::steady_clock::now();
  const Note note = [&](const char* what) {
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - started;
    if (observer_) observer_->step({task, workload, index, count, elapsed.count()}, what);
  };
  const Step step = [&](const char* what, const char* phase) {
    phases_.next(phase);
    note(what);
  };
  if (!build.ok) {
    trace.status = Status::compile_error;
    trace.message = "the solution did not compile";
    trace.log = cap(build.log);
    return trace;
  }
  const auto code = make_task_code(task.name);
  const auto scalars = scalars_for(task, workload);
  WorkerRequest request = request_for(task, workload, build, environment_, settings_);
  std::string warmup_summary;
  if (solution.language == Language::triton) {
    step("compiling the Triton kernels (warm-up)", "warmup");
    if (auto stop = triton_warmup_for(solution, build, request, warmup_summary)) {
      trace.status = stop->first;
      trace.message = stop->second;
      return trace;
    }
  }
  // The device's lock (a campaign's concurrent runs), from the worker's start (its set-up, while its draws
  // are made) to the workload's end (its checks and the baselines' timing): exclusive when timed, so that
  // nothing else runs on the device while the clock does; shared when only checked.
  const auto hold = environment_.hold_device ? environment_.hold_device(settings_.time) : nullptr;
  WorkloadDraws drawn(task, workload, settings_.seed);
  WorkerOutcome outcome;
  std::optional<Finding> found;
  std::string first_run_disagreed;
  for (int run_index = 1;; ++run_index) {
    step(run_index > 1                ? "running and timing the solution again (the outside clock disagreed)"
         : settings_.time             ? "running and timing the solution"
                                      : "running the solution",
         "worker");
    std::future<Oracles> oracles;
    // The draws, and their oracles started: called when the worker is ready for its draws (it has started
    // and set up while they were made; a run again finds them made), or after it when it ended before.
    const auto take = [&]() -> const Draws& {
      const Draws& taken = drawn.get();
      if (!oracles.valid())
        oracles = start_oracles(task, *code, scalars, taken.first, taken.second, environment_.device, request, note);
      return taken;
    };
    WorkerLaunch launch = launch_for(environment_, settings_);
    // The worker's first clock mark comes after it has its draws, so the oracles have started by then.
    launch.before_first_clock = [&oracles] {
      if (oracles.valid()) oracles.wait();
    };
    outcome = run_worker(launch, request, [&] {
      const Draws& taken = take();
      return DrawPair{bytes_of(task, taken.first), bytes_of(task, taken.second)};
    });
    const Draws& taken = take();
    const Oracles done = oracles.get();  // an oracle's error, rethrown
    record_worker(trace, outcome);
    phases_.split(outcome.report.phases, "worker_start");

    step("checking", "check");
    const WorkloadRun run{.task = task, .workload = workload, .code = *code, .scalars = scalars,
                          .device = environment_.device, .request = request, .outcome = outcome, .want = done.want,
                          .second_want = done.second_want, .oracle_of_call = std::cref(done.first),
                          .first_digests = input_digests(task, taken.first, request.digest_key),
                          .second_digests = input_digests(task, taken.second, request.digest_key),
                          .ceilings = environment_.ceilings, .timed = settings_.time};
    trace.comparisons.clear();
    found = check_run(run, trace.comparisons);
    if (!found || !found->host_may_explain || run_index == 2) break;
    // Once: the same draws, new secrets (digest key, patches, kept calls), a new worker. What the first
    // run learnt of its secrets is worth nothing to the second.
    first_run_disagreed = found->message;
    refresh_secrets(request);
  }
  if (!warmup_summary.empty()) trace.log = cap(warmup_summary + trace.log);
  if (!first_run_disagreed.empty())
    trace.warnings.push_back(fmt::format("the first run was rejected by the outside clock ({}); the solution ran again "
                                         "with new secrets and this is the second run: a stall of the host explains "
                                         "such a disagreement once, a forged clock every time",
                                         first_run_disagreed));
  if (found) {
    trace.status = found->status;
    trace.message = found->message;
    return trace;
  }
  trace.status = Status::passed;
  if (!settings_.time) return trace;
  const auto times =
      time_baselines(task, workload, *code, drawn.get().first, scalars, environment_, settings_, baselines_, step);
  add_performance(trace, task, workload, *outcome.report.timing, times.eager, times.library, environment_);
  if (!times.library_refused.empty())
    trace.warnings.push_back(fmt::format("the library path ({}) cannot run this workload: {}", task.library, times.library_refused));
  return trace;
}


}  // namespace d2k
