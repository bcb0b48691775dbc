#include "eval/evaluator.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>

#include "core/error.hpp"
#include "core/file_bytes.hpp"
#include "core/timestamp.hpp"
#include "core/json.hpp"
#include "core/metrics.hpp"
#include "core/overhead.hpp"
#include "eval/baselines.hpp"
#include "reference/check.hpp"
#include "reference/inputs.hpp"
#include "reference/oracle.hpp"
#include "reference/task_code.hpp"
#include "reference/tensors.hpp"
#include "reference/torch_device.hpp"
#include "runner/process.hpp"
#include "timing/rotation.hpp"
#include "timing/stats.hpp"
#include "timing/timer.hpp"

namespace d2k {
namespace {

constexpr std::size_t kLogCap = 16 * 1024;


std::string cap(const std::string& log) {
  if (log.size() <= kLogCap) return log;
  return log.substr(0, kLogCap / 2) + fmt::format("\n[... {} bytes cut ...]\n", log.size() - kLogCap) +
         log.substr(log.size() - kLogCap / 2);
}

// A fresh folder for one worker request; removed when it goes out of scope.
class ScratchDir {
 public:
  ScratchDir(const std::filesystem::path& parent, const std::string& hint) {
    std::random_device random;
    path_ = parent / fmt::format("{}-{:08x}", hint, random());
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::string safe_name(std::string name) {
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  return name;
}

// Nothing when the two files hold the same bytes; otherwise how they differ, for a person.
std::optional<std::string> changed_bytes(const std::filesystem::path& sent, const std::filesystem::path& after) {
  const auto x = file_bytes(sent);
  if (!x) fail("could not read {}", sent.string());
  const auto y = file_bytes(after);
  if (!y) return std::string("the worker did not return it");
  if (x->size() != y->size()) return fmt::format("{} bytes came back for {}", y->size(), x->size());
  if (*x == *y) return std::nullopt;  // memcmp: the common case, fast
  std::size_t differ = 0;
  for (std::size_t i = 0; i < x->size(); ++i) differ += (*x)[i] != (*y)[i];
  return fmt::format("{} of {} bytes differ", differ, x->size());
}

// The seed of the second draw: another draw than the first for every seed, known only here.
uint64_t second_seed(uint64_t seed) { return (seed ^ 0x9E3779B97F4A7C15ULL) * 0xBF58476D1CE4E5B9ULL + 1; }

// The float64 oracle of one draw of the inputs, left on the device it was computed on: the check runs
// there too (on a GPU in milliseconds; copying a 67 M-element float64 oracle to the host and checking it
// there cost seconds per workload). The GPU memory is this process's, out of the worker's reach.
TensorMap oracle_of(const Task& task, const TaskCode& code, const TensorMap& inputs, const Scalars& scalars,
                    Device device) {
  auto placed = place_inputs(inputs, device, Precision::oracle);
  return call_reference(task, code, placed, scalars);
}

// The outputs the worker returned, on `device`, where the oracle they are checked against lives.
TensorMap read_outputs(const Task& task, const Workload& workload, const WorkerRequest& request,
                       const std::filesystem::path& dir, const std::string& suffix, Device device) {
  TensorMap got;
  for (std::size_t i = 0; i < task.outputs.size(); ++i) {
    const auto& out = task.outputs[i];
    got[out.name] = read_span(dir / (request.outputs[i].file + suffix), out.dtype, geometry_of(out, workload))
                        .to(to_torch(device));
  }
  return got;
}

// The worker's own phases as trace phases: its timing loop is the measurement, the rest is its overhead.
std::vector<Phase> worker_phases(const WorkerResult& result) {
  std::vector<Phase> phases;
  for (const auto& phase : result.phases)
    phases.push_back({phase.name == "timing" ? kSolutionTimingPhase : "worker_" + phase.name, phase.seconds});
  return phases;
}

// Why the timed calls disqualify a solution whose checked call passed; nothing when they do not.
std::optional<std::string> timed_call_problem(const WorkerResult& result) {
  const TimedCallCheck& check = result.timed_check;
  if (!check.modified_inputs.empty()) {
    std::string which;
    for (const auto& input : check.modified_inputs) which += (which.empty() ? "" : ", ") + input;
    return fmt::format("modified its input {} during the timed calls; inputs are read-only", which);
  }
  if (check.mismatched_calls > 0) {
    return fmt::format("timed call {} (input copy {}) wrote '{}' differently from the checked call ({} bytes "
                       "differ; {} of {} timed calls did): every call must compute its outputs",
                       check.first_call, check.first_set, check.first_output, check.first_bytes,
                       check.mismatched_calls, check.calls);
  }
  return std::nullopt;
}

// The worker's token for one evaluation (worker_protocol.hpp: WorkerResult::token): 128 random bits.
std::string fresh_token() {
  std::random_device random;
  std::string token;
  for (int i = 0; i < 4; ++i) token += fmt::format("{:08x}", random());
  return token;
}

// Only the worker was handed the token, on its stdin: a result.json without it, or one that is not
// even JSON (the worker's is always whole), was written by the solution.
bool written_by_worker(const nlohmann::json& result, const std::string& token) {
  if (!result.is_object() || !result.contains("token") || !result.at("token").is_string()) return false;
  return result.at("token").get_ref<const std::string&>() == token;
}

WireTensor wire(const TensorSpec& spec, const Workload& workload, const std::string& file) {
  const auto geometry = geometry_of(spec, workload);
  return WireTensor{spec.name, spec.dtype, geometry.shape, geometry.strides, file, spec.inplace};
}

}  // namespace

Evaluator::Evaluator(const EvalEnvironment& environment, EvalSettings settings, EvalObserver* observer)
    : environment_(environment), settings_(std::move(settings)), observer_(observer) {}

std::vector<Trace> Evaluator::evaluate(const Task& task, const Solution& solution) {
  const auto workloads = select_workloads(task, settings_.workloads, settings_.include_hidden, settings_.tier);
  if (!make_task_code(task.name)) fail("task {} has no compiled-in reference ({}/reference.cpp)", task.name, task.dir.string());
  require_torch_device(environment_.device);

  BuildOptions build_options;
  build_options.device = environment_.device;
  build_options.cache_dir = environment_.build_cache;
  build_options.abi_include_dir = environment_.root / "include";
  build_options.timeout_seconds = settings_.build_timeout_seconds;
  build_options.sandbox = environment_.sandbox;
  if (observer_) observer_->building(task, solution);
  const auto build = build_solution(solution, build_options);
  if (observer_) observer_->built(task, build);

  std::vector<Trace> traces;
  int index = 0;
  for (const auto* workload : workloads) {
    const auto started = std::chrono::steady_clock::now();
    phases_ = PhaseClock();
    traces.push_back(evaluate_workload(task, *workload, solution, build, ++index, static_cast<int>(workloads.size())));
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
  Trace trace;
  trace.task = task.name;
  trace.workload = workload.name;
  trace.solution = solution.name;
  trace.device = environment_.device;
  trace.device_name = environment_.device_name;
  trace.seed = settings_.seed;
  trace.timestamp = utc_timestamp();
  // Each progress line says how long the workload has taken so far: the harness's own cost shows.
  const auto started = std::chrono::steady_clock::now();
  const auto step = [&](const char* what) {
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - started;
    if (observer_) observer_->step({task, workload, index, count, elapsed.count()}, what);
  };

  if (!build.ok) {
    trace.status = Status::compile_error;
    trace.message = "the solution did not compile";
    trace.log = cap(build.log);
    return trace;
  }

  const auto code = make_task_code(task.name);
  const auto scalars = scalars_for(task, workload);
  step("inputs");
  phases_.next("inputs");
  const auto inputs = make_inputs(task, *code, workload, settings_.seed);

  // A second draw, a few elements away from the first, run first in the same buffers: outputs that
  // follow the buffers' addresses or a sampled fingerprint rather than the contents show. Deterministic
  // tasks run it twice and compare the bytes.
  phases_.next("second_inputs");
  const auto second_inputs = make_second_inputs(task, *code, workload, inputs, second_seed(settings_.seed));

  step("oracle");
  phases_.next("oracle");
  const TensorMap want = oracle_of(task, *code, inputs, scalars, environment_.device);
  phases_.next("second_oracle");
  const TensorMap second_want = oracle_of(task, *code, second_inputs, scalars, environment_.device);

  phases_.next("write_files");
  ScratchDir dir(environment_.scratch_dir, safe_name(task.name + "-" + workload.name));
  WorkerRequest request;
  request.library = std::filesystem::absolute(build.library).string();
  request.device = environment_.device;
  request.time = settings_.time;
  request.timing = settings_.timing;
  for (const auto& spec : task.inputs) {
    request.inputs.push_back(wire(spec, workload, "in-" + safe_name(spec.name) + ".bin"));
    write_span(inputs.at(spec.name), dir.path() / request.inputs.back().file);
    request.second_inputs.push_back("in-" + safe_name(spec.name) + ".second.bin");
    write_span(second_inputs.at(spec.name), dir.path() / request.second_inputs.back());
  }
  request.deterministic = task.deterministic;
  for (const auto& spec : task.outputs) request.outputs.push_back(wire(spec, workload, "out-" + safe_name(spec.name) + ".bin"));
  for (const auto& [spec, value] : scalars_of(task, workload)) request.scalars.push_back({spec->name, spec->is_int, value});
  {
    std::ofstream out(dir.path() / "request.json");
    out << nlohmann::json(request).dump(2);
  }

  step(settings_.time ? "running and timing the solution" : "running the solution");
  ProcessSpec spec;
  spec.argv = {environment_.worker.string(), (dir.path() / "request.json").string()};
  if (settings_.ncu) {
    std::vector<std::string> ncu = {settings_.ncu->ncu.string()};
    ncu.insert(ncu.end(), settings_.ncu->args.begin(), settings_.ncu->args.end());
    ncu.insert(ncu.end(), {"--log-file", (dir.path() / "ncu-report.txt").string()});
    spec.argv.insert(spec.argv.begin(), ncu.begin(), ncu.end());
  }
  spec.cwd = dir.path();
  spec.timeout_seconds = settings_.worker_timeout_seconds;
  const std::string token = fresh_token();
  spec.stdin_data = token + "\n";
  if (environment_.sandbox) {
    spec.sandbox = worker_sandbox(*environment_.sandbox, environment_.worker, build.library, dir.path(),
                                  environment_.device == Device::cuda, settings_.worker_timeout_seconds);
    if (settings_.ncu) spec.sandbox->read.insert(spec.sandbox->read.end(), settings_.ncu->read.begin(), settings_.ncu->read.end());
  }
  phases_.next("worker");
  const auto process = run_process(spec);
  trace.log = cap(process.output);
  if (settings_.ncu) {
    std::error_code ignored;  // no report: the caller says so, with this trace's log
    std::filesystem::copy_file(dir.path() / "ncu-report.txt", settings_.ncu->report,
                               std::filesystem::copy_options::overwrite_existing, ignored);
  }

  WorkerResult result;
  const auto result_file = dir.path() / "result.json";
  const bool have_result = std::filesystem::exists(result_file);
  if (have_result) {
    std::ifstream in(result_file);
    const auto parsed = nlohmann::json::parse(in, nullptr, false);
    if (!written_by_worker(parsed, token)) {
      trace.status = Status::rejected;
      trace.message = "result.json was not written by the worker (its token is missing or wrong): the solution "
                      "tampered with the harness's result";
      return trace;
    }
    result = parsed.get<WorkerResult>();
    if (!result.device_name.empty()) trace.device_name = result.device_name;
    trace.clocks = result.clocks;
    phases_.split(worker_phases(result), "worker_start");
  }
  if (process.end == ProcessResult::End::timed_out) {
    trace.status = Status::timeout;
    trace.message = fmt::format("the worker {} (phase: {})", process.describe(), have_result ? "timing" : "run");
    return trace;
  }
  if (have_result && result.status == "rejected") {
    trace.status = Status::rejected;
    trace.message = fmt::format("{}: {}", result.phase, result.message);
    return trace;
  }
  if (have_result && result.status != "ok") {
    trace.status = Status::runtime_error;
    trace.message = fmt::format("{}: {}", result.phase, result.message);
    return trace;
  }
  const bool outputs_ready = have_result && (result.phase == "timing" || result.phase == "done");
  if (!process.ok() || !outputs_ready) {
    trace.status = Status::runtime_error;
    trace.message = fmt::format("the worker {}{}", process.describe(), have_result ? " while timing" : "");
    if (!outputs_ready) return trace;
  }

  step("checking");
  phases_.next("read_outputs");
  const TensorMap got = read_outputs(task, workload, request, dir.path(), "", environment_.device);
  phases_.next("input_check");
  // Inputs are read-only but for the in-place outputs: compare what the worker left with what was sent,
  // for both draws.
  std::vector<std::string> sent_files = request.second_inputs;
  for (const auto& input : request.inputs) sent_files.push_back(input.file);
  for (std::size_t f = 0; f < sent_files.size(); ++f) {
    const auto& spec = task.inputs[f % task.inputs.size()];
    if (const auto* out = task.find_output(spec.name); out && out->inplace) continue;
    const auto sent = dir.path() / sent_files[f];
    if (const auto changed = changed_bytes(sent, std::filesystem::path(sent.string() + ".after"))) {
      trace.status = Status::rejected;
      trace.message = fmt::format("modified its input '{}' ({}); inputs are read-only", spec.name, *changed);
      return trace;
    }
  }
  phases_.next("check");
  auto verdict = check(task, *code, scalars, got, want, result.guard_violations);
  trace.comparisons = std::move(verdict.comparisons);
  if (verdict.status != Status::passed) {
    trace.status = verdict.status;
    trace.message = verdict.message;
    // Wrong for its own inputs but right for the draw the same buffers held before: the solution
    // answers by address (a cache), not by content.
    if (check(task, *code, scalars, got, second_want, {}).status == Status::passed) {
      trace.status = Status::rejected;
      trace.message = "returned the outputs of the inputs the same buffers held in the previous call, which differed "
                      "in a few elements: its outputs follow the addresses (or a sample) of the inputs, not their "
                      "contents (a cache?)";
    }
    return trace;
  }
  phases_.next("second_check");
  const auto second_got = read_outputs(task, workload, request, dir.path(), ".second", environment_.device);
  if (auto second = check(task, *code, scalars, second_got, second_want, result.guard_violations);
      second.status != Status::passed) {
    trace.status = second.status;
    trace.message = fmt::format("on a second draw of the inputs (about 1 in {} elements changed, seed {}): {}",
                                kSecondDrawChange, second_seed(settings_.seed), second.message);
    return trace;
  }
  if (!process.ok()) return trace;  // crashed while timing: runtime_error set above
  if (const auto problem = timed_call_problem(result)) {
    trace.status = Status::rejected;
    trace.message = *problem;
    return trace;
  }
  if (settings_.time && !request.deterministic) {
    // The timed calls of a task that may differ run to run bytewise: the last one is checked numerically.
    phases_.next("timed_check");
    const auto timed_got = read_outputs(task, workload, request, dir.path(), ".timed", environment_.device);
    if (auto timed = check(task, *code, scalars, timed_got, want, result.guard_violations);
        timed.status != Status::passed) {
      trace.status = timed.status;
      trace.message = fmt::format("the last timed call's outputs: {}", timed.message);
      return trace;
    }
  }

  trace.status = Status::passed;
  if (!settings_.time) return trace;
  if (result.samples_ms.empty()) {
    trace.status = Status::runtime_error;
    trace.message = "the worker returned no timing samples";
    return trace;
  }
  const double flops = flops_of(task, workload), min_bytes = min_bytes_of(task, workload);
  const auto summary = summarize(result.samples_ms);
  if (const auto impossible = below_floor(summary.median_ms, flops, min_bytes, environment_.ceilings, task.flops_dtype)) {
    // Faster than the machine can go: the timer was cheated somehow; no speedup is reported.
    trace.status = Status::rejected;
    trace.message = *impossible;
    return trace;
  }
  std::optional<TimingSummary> baseline;
  if (settings_.baseline) {
    step("timing the eager baseline");
    phases_.next(kBaselineTimingPhase);
    baseline = baseline_time(task, workload, *code, inputs, scalars, environment_.device, settings_.timing, baselines_);
  }
  trace.performance = performance_of(summary, baseline, flops, min_bytes, environment_.ceilings, task.flops_dtype);
  trace.performance->rotation_sets = result.rotation_sets;
  trace.performance->rotation_bytes = result.rotation_bytes;
  return trace;
}


}  // namespace d2k
