#include "worker/worker.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "core/error.hpp"
#include "core/json.hpp"
#include "timing/cuda_util.hpp"
#include "timing/device_info.hpp"
#include "timing/gpu_clocks.hpp"
#include "timing/timer.hpp"
#include "worker/buffers.hpp"
#include "worker/channel.hpp"
#include "worker/leftovers.hpp"
#include "worker/library.hpp"
#include "worker/evidence_write.hpp"
#include "worker/request.hpp"
#include "worker/seccomp.hpp"
#include "worker/threads.hpp"
#include "worker/timed_copies.hpp"
#include "worker/triton.hpp"
#ifdef D2K_WITH_CUDA
#include "timing/cuda_guards.hpp"
#include "timing/cupti_clock.hpp"
#endif

namespace d2k {
namespace {

using Clock = std::chrono::steady_clock;

// Kernels of the harness's own: everything in namespace d2k (the L2 flush, digests, patches).
constexpr const char* kHarnessKernelPrefix = "_ZN3d2k";

// The solution failed (runtime_error) or was caught (rejected) in a stage.
struct SolutionStop {
  WorkerStatus status;
  Stage stage;
  std::string message;
};
[[noreturn]] void failed(Stage stage, std::string message) {
  throw SolutionStop{WorkerStatus::runtime_error, stage, std::move(message)};
}
[[noreturn]] void rejected(Stage stage, std::string message) {
  throw SolutionStop{WorkerStatus::rejected, stage, std::move(message)};
}

// Thrown out of a timed call so that the timer stops at the first failing call.
struct TimedCallFailed {};

d2k_tensor abi_tensor(const WireTensor& tensor, void* data) {
  d2k_tensor out{};
  out.name = tensor.name.c_str();
  out.data = data;
  out.dtype = to_abi(tensor.dtype);
  out.rank = static_cast<int32_t>(tensor.shape.size());
  for (std::size_t i = 0; i < tensor.shape.size(); ++i) {
    out.shape[i] = tensor.shape[i];
    out.strides[i] = tensor.strides[i];
  }
  return out;
}

// How the worker ends once the solution is loaded: no atexit handler or static destructor of the
// solution's runs after the last frame, and no stdio buffer it left unflushed is written out.
[[noreturn]] void end_worker(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(code);
}

// The inputs the orchestrator sent: per draw, a view of each input's bytes in the inputs file.
struct Draws {
  std::vector<std::string_view> first, second;
};

// The draws' input frames of the control stream (where each input of each draw lies in the inputs file),
// then the file mapped: the orchestrator sends these frames only once it has filled and sealed it.
Draws read_draws(ControlChannel& control, const WorkerRequest& request) {
  struct Place {
    int draw = 0;
    std::size_t input = 0, offset = 0;
  };
  std::vector<Place> places;
  const std::size_t count = request.inputs.size() * (request.second_draw ? 2 : 1);
  for (std::size_t k = 0; k < count; ++k) {
    const Frame frame = control.read();
    if (frame.kind != FrameKind::input) fail("control frame {} is not an input of the request", frame.seq);
    const auto fields = nlohmann::json::parse(frame.fields);
    const Place place{fields.at("draw").get<int>(), fields.at("input").get<std::size_t>(),
                      fields.at("offset").get<std::size_t>()};
    if (place.input >= request.inputs.size() || (place.draw != 1 && place.draw != 2))
      fail("control frame {} is not an input of the request", frame.seq);
    places.push_back(place);
  }
  const std::string_view file = map_inputs();
  Draws draws;
  for (const Place& place : places) {
    const std::size_t bytes = span_bytes(request.inputs[place.input]);
    if (place.offset > file.size() || bytes > file.size() - place.offset)
      fail("input '{}' of draw {}: {} bytes at {} of an inputs file of {}", request.inputs[place.input].name,
           place.draw, bytes, place.offset, file.size());
    auto& list = place.draw == 1 ? draws.first : draws.second;
    list.resize(request.inputs.size());
    list[place.input] = file.substr(place.offset, bytes);
  }
  return draws;
}

class Evaluation {
 public:
  Evaluation(WorkerRequest request, ControlChannel& control, EvidenceChannel& evidence)
      : request_(std::move(request)), control_(control), evidence_(evidence) {}

  // The worker's own preparation: device, stream, buffers, the copies of the timed calls. It needs nothing
  // of the draws, so it runs while the orchestrator may still be making them. A failure here is not the
  // solution's.
  void setup();
  // The draws, once the orchestrator sends them (it may still be making them); before any of the
  // solution's code is loaded.
  void wait_for_draws();
  // The solution's steps, then release and the `end` frame; throws only for the worker's own failures.
  void run();

 private:
  void stage(Stage next);
  void noop_timing(ClockMark begin, ClockMark end);
  void load();
  void workspace();
  void prepare();
  void second_draw();
  void checked_call();
  void seeded_calls();
  void timing();
  void verification_calls(Stage stage, int calls, bool keep_outputs, SecondClockReport& second);
  void noop_call();
  void release();

  // Calls into the solution, turning a non-zero return, a C++ exception or a device fault into a
  // runtime_error of the stage; then the guards and what the call left behind.
  template <typename Call>
  void call_solution(Stage stage, const char* entry, Call&& call);
  void before_call();
  void after_call(Stage stage, const char* entry = "d2k_run");
  std::optional<std::string> device_error();
  void check_device_after(Stage stage, const char* entry);
  std::string solution_message(const char* entry, int code);
  // The guards of the call's own buffers; with `copies`, of the timed calls' copies too.
  void check_guards(bool copies = true);
  void upload(const std::vector<std::string_view>& draw, bool prepare_visible_only = false);
  void poison_outputs();
  void send_outputs(Draw draw, const std::vector<const GuardedBuffer*>& buffers, int64_t call = -1);
  std::vector<const GuardedBuffer*> output_buffers() const;
  void send_input_digests(std::string_view what);
  CallHooks hooks(bool solution, ClockMark begin, ClockMark end);

  void clock_mark(ClockMark mark);

  WorkerRequest request_;
  Draws draws_;
  ControlChannel& control_;
  EvidenceChannel& evidence_;
  Stage stage_ = Stage::setup;
  Clock::time_point stage_start_ = Clock::now();
  uint64_t guard_seed_ = unpredictable_seed();
#ifdef D2K_WITH_CUDA
  std::unique_ptr<CudaStream> stream_;
  std::unique_ptr<KernelClock> kernel_clock_;  // the second clock; paused but in the verification calls
  std::string kernel_clock_unavailable_;
#endif
  std::vector<std::unique_ptr<GuardedBuffer>> buffers_;  // copy 0's inputs, its outputs not in place, workspace
  std::vector<GuardedBuffer*> output_buffers_;           // one per output, in request order
  std::vector<d2k_tensor> inputs_, outputs_;
  std::vector<d2k_scalar> scalars_;
  std::unique_ptr<TimedCopies> copies_;
  std::unique_ptr<ClockSensor> sensor_;
  GuardedBuffer* workspace_ = nullptr;
  std::vector<GuardViolation> guard_violations_;
  SolutionLibrary library_;
  char error_[D2K_ERROR_CAPACITY] = {};
  d2k_call call_{};
  void* prepared_ = nullptr;
  bool prepared_ok_ = false;
  bool device_broken_ = false;  // a sticky device fault: nothing more can be read from it
  int threads_before_ = 0;      // before the solution was loaded: the worker's own and the runtime's
  int64_t noop_samples_ = 0;
};

void Evaluation::stage(Stage next) {
  const auto now = Clock::now();
  evidence_.send(FrameKind::stage, {{"stage", next}, {"seconds", std::chrono::duration<double>(now - stage_start_).count()}});
  stage_ = next;
  stage_start_ = now;
}

void Evaluation::setup() {
  const Device device = request_.device;
#ifdef D2K_WITH_CUDA
  if (device == Device::cuda) {
    check_cuda(cudaFree(nullptr), "creating the CUDA context");
    stream_ = std::make_unique<CudaStream>();
    call_.stream = stream_->get();
    pin_no_l2_persistence();
    // CUPTI starts a thread of its own at its first window: before the thread count's baseline.
    try {
      kernel_clock_ = std::make_unique<KernelClock>(kHarnessKernelPrefix);
      kernel_clock_->begin_window(stream_->get());
      kernel_clock_->end_window();
      kernel_clock_->collect();
      kernel_clock_->pause();
    } catch (const Error& error) {
      kernel_clock_.reset();
      kernel_clock_unavailable_ = error.what();
    }
  }
#endif
  for (const auto& input : request_.inputs) {
    auto buffer = std::make_unique<GuardedBuffer>(device, input.name, span_bytes(input), guard_seed_);
    buffer->fill(0xFF);
    inputs_.push_back(abi_tensor(input, buffer->data()));
    buffers_.push_back(std::move(buffer));
  }
  for (const auto& output : request_.outputs) {
    GuardedBuffer* buffer = nullptr;
    if (const WireTensor* input = inplace_input(request_, output)) {
      buffer = buffers_[static_cast<std::size_t>(input - request_.inputs.data())].get();
    } else {
      // Poisoned: NaN for floats, -1 for integers; whatever the solution leaves unwritten stays wrong.
      auto owned = std::make_unique<GuardedBuffer>(device, output.name, span_bytes(output), guard_seed_);
      owned->fill(0xFF);
      buffer = owned.get();
      buffers_.push_back(std::move(owned));
    }
    output_buffers_.push_back(buffer);
    outputs_.push_back(abi_tensor(output, buffer->data()));
  }
  for (const auto& scalar : request_.scalars) {
    d2k_scalar abi{};
    abi.name = scalar.name.c_str();
    abi.kind = scalar.is_int ? D2K_SCALAR_INT : D2K_SCALAR_FLOAT;
    if (scalar.is_int) {
      abi.i = std::llround(scalar.value);
    } else {
      abi.f = scalar.value;
    }
    scalars_.push_back(abi);
  }
  call_.abi_version = D2K_ABI_VERSION;
  call_.inputs = inputs_.data();
  call_.num_inputs = static_cast<int32_t>(inputs_.size());
  call_.outputs = outputs_.data();
  call_.num_outputs = static_cast<int32_t>(outputs_.size());
  call_.scalars = scalars_.data();
  call_.num_scalars = static_cast<int32_t>(scalars_.size());
  call_.error = error_;
  if (request_.time) {
    CallTensors copy0{{}, output_buffers_, inputs_, outputs_};
    for (std::size_t i = 0; i < request_.inputs.size(); ++i) copy0.inputs.push_back(buffers_[i].get());
    copies_ = std::make_unique<TimedCopies>(request_, std::move(copy0), guard_seed_);
    // Opening NVML takes a while; it belongs to the set-up, not to the timing.
    if (device == Device::cuda) sensor_ = std::make_unique<ClockSensor>();
  }
  // A Triton solution: the interpreter and Triton start here, the worker's own set-up, before the filter
  // (Triton runs ldconfig and ptxas --version once) and before any of the solution's code.
  if (request_.python) {
    if (device != Device::cuda) fail("a Triton solution runs on the cuda device only: the cpu device has no Triton backend");
    start_triton(*request_.python);
  }
}

void Evaluation::wait_for_draws() {
  stage(Stage::draws);
  draws_ = read_draws(control_, request_);
}

void Evaluation::run() {
  try {
    if (request_.time) {
      stage(Stage::noop_timing);
      noop_timing(ClockMark::noop_begin, ClockMark::noop_end);
    }
    stage(Stage::load);
    // From here on the process belongs to the solution as much as to the worker: nothing may start a
    // timer, a handler or a process, touch the channels, or write evidence but the worker's own write.
    forbid_outside_work({kControlFd, kEvidenceFd}, EvidenceGate{kEvidenceFd, evidence_write_address()});
    threads_before_ = kernel_thread_count();
    load();
    stage(Stage::workspace);
    workspace();
    stage(Stage::prepare);
    prepare();
    if (request_.second_draw) second_draw();
    stage(Stage::run);
    checked_call();
    if (request_.seeded_calls > 0) seeded_calls();
    if (request_.time) {
      timing();
      stage(Stage::noop_call);
      noop_call();
      stage(Stage::noop_timing_after);
      noop_timing(ClockMark::noop_after_begin, ClockMark::noop_after_end);
    }
  } catch (const SolutionStop& stop) {
    // State the solution left (a stream still capturing a graph) can make the harness's own device calls
    // fail too: the guards are then not read, and the failure that names that state still goes out.
    if (!device_broken_) {
      try {
        check_guards();
      } catch (const Error&) {
        device_broken_ = true;
      }
    }
    evidence_.send(FrameKind::failure, WorkerFailure{stop.status, stop.stage, stop.message});
  }
  stage(Stage::release);
  release();
  stage(Stage::done);
  evidence_.send(FrameKind::end, {{"device_name", device_name(request_.device)}, {"guard_violations", guard_violations_}});
}

// The timing loop with nothing called: what the harness's own steps around a call cost (the flush, the
// restores and patches, the synchronization), bracketed by clock marks so that the orchestrator can
// measure it by its own clock. Once before the solution is loaded, and once after its timed calls (their
// evidence already sent), where nothing of the solution's runs either: no call, and no thread, timer or
// handler of its own could have outlived the calls.
void Evaluation::noop_timing(ClockMark begin, ClockMark end) {
  TimingConfig config = request_.timing;
  config.warmup = 1;
  config.min_samples = config.max_samples = std::clamp(request_.timing.min_samples, 10, 50);
  config.target_ci = 0;
  const auto samples = measure(request_.device, [] {}, hooks(false, begin, end), call_.stream, config);
  noop_samples_ = static_cast<int64_t>(samples.size());
  call_.inputs = inputs_.data();
  call_.outputs = outputs_.data();
}

CallHooks Evaluation::hooks(bool solution, ClockMark begin, ClockMark end) {
  CallHooks hooks;
  hooks.before = [this] {
    copies_->before_call(call_);
    before_call();
  };
  if (solution) {
    // A thread the call left must be seen before it could finish its work unseen.
    hooks.right_after = [this] {
      if (auto left = leftover_threads(threads_before_)) rejected(Stage::timing, *left);
    };
    hooks.after = [this] {
      after_call(Stage::timing);
      copies_->after_call();
    };
  } else {
    // The same cost as the solution's loop, for the outside clock's comparison.
    hooks.right_after = [] { (void)kernel_thread_count(); };
  }
  hooks.sampling_begins = [this, begin] { clock_mark(begin); };
  hooks.sampling_ends = [this, end] { clock_mark(end); };
  return hooks;
}

// A mark of the outside clock: the worker waits until the orchestrator has taken its times (the ack),
// so that nothing the worker does next is counted on either side of the mark.
void Evaluation::clock_mark(ClockMark mark) {
  const uint64_t seq = evidence_.send(FrameKind::clock, {{"mark", name_of(mark)}});
  const Frame ack = control_.read();
  if (ack.kind != FrameKind::ack || nlohmann::json::parse(ack.fields).value("seq", uint64_t{0}) != seq)
    fail("the control stream answered clock frame {} with a {} frame", seq, name_of(ack.kind));
}

void Evaluation::load() {
  if (request_.python) {
    TritonLoad loaded;
    try {
      loaded = load_triton(request_);
    } catch (const Error& error) {
      failed(Stage::load, error.what());
    }
    if (loaded.refused) rejected(Stage::load, *loaded.refused);
    if (loaded.error) failed(Stage::load, *loaded.error);
    library_ = loaded.library;
    if (auto library = forbidden_library_loaded()) rejected(Stage::load, *library);
    return;
  }
  try {
    library_ = load_library(request_.library);
  } catch (const Error& error) {
    failed(Stage::load, error.what());
  }
  if (auto library = forbidden_library_loaded()) rejected(Stage::load, *library);
}

void Evaluation::workspace() {
  if (library_.workspace_size == nullptr) return;
  std::size_t bytes = 0;
  call_solution(Stage::workspace, "d2k_workspace_size", [&] { return library_.workspace_size(&call_, &bytes); });
  if (bytes == 0) return;
  try {
    auto buffer = std::make_unique<GuardedBuffer>(request_.device, "workspace", bytes, guard_seed_);
    buffer->fill(0xFF);
    call_.workspace = buffer->data();
    call_.workspace_bytes = bytes;
    workspace_ = buffer.get();
    buffers_.push_back(std::move(buffer));
  } catch (const Error& error) {
    failed(Stage::workspace, fmt::format("the {} bytes of workspace asked for: {}", bytes, error.what()));
  }
  if (copies_) copies_->set_workspace(workspace_);
}

// Prepare sees the inputs the task lets it see (weights); the others still hold poison.
void Evaluation::prepare() {
  if (library_.prepare == nullptr) return;
  upload(draws_.first, true);
  call_solution(Stage::prepare, "d2k_prepare", [&] { return library_.prepare(&call_, &prepared_); });
  prepared_ok_ = true;
  call_.prepared = prepared_;
}

// The second draw runs first, in the very buffers the first draw then fills: a solution that keys a
// cache on the addresses it is handed returns the second draw's outputs for the first, which the
// orchestrator's check of the first draw sees. A deterministic task runs it twice, outputs poisoned
// between, and the repeat's outputs go back as digests: outputs that read memory the solution did not
// write, or that depend on anything but the inputs, differ.
void Evaluation::second_draw() {
  stage(Stage::second_draw);
  upload(draws_.second);
  poison_outputs();
  call_solution(Stage::second_draw, "d2k_run", [&] { return library_.run(&call_); });
  send_outputs(Draw::second, output_buffers());
  send_input_digests(kDigestInputsSecond);
  if (!request_.deterministic) return;
  stage(Stage::repeat);
  upload(draws_.second);
  poison_outputs();
  call_solution(Stage::repeat, "d2k_run", [&] { return library_.run(&call_); });
  std::vector<uint64_t> digests;
  for (const GuardedBuffer* output : output_buffers_) digests.push_back(output->digest(request_.digest_key));
  evidence_.send(FrameKind::digests, {{"what", kDigestRepeat}, {"digests", digests}});
}

void Evaluation::checked_call() {
  upload(draws_.first);
  poison_outputs();
  call_solution(Stage::run, "d2k_run", [&] { return library_.run(&call_); });
  send_outputs(Draw::checked, output_buffers());
  send_input_digests(kDigestInputsChecked);
}

// A task with a sampled output: more calls on the checked call's inputs (still in its buffers), each with
// the seed scalar set afresh, outputs poisoned before and sent right after each; the orchestrator tests
// their draws against the distribution (reference/sample_test.hpp). The seed is restored after.
void Evaluation::seeded_calls() {
  stage(Stage::seeded);
  auto seed = std::find_if(scalars_.begin(), scalars_.end(),
                           [&](const d2k_scalar& s) { return request_.seed_scalar == s.name; });
  const int64_t kept = seed->i;
  for (int call = 0; call < request_.seeded_calls; ++call) {
    seed->i = static_cast<int64_t>(seeded_seed(request_.seed_key, call));
    poison_outputs();
    call_solution(Stage::seeded, "d2k_run", [&] { return library_.run(&call_); });
    send_outputs(Draw::seeded, output_buffers(), call);
  }
  seed->i = kept;
  check_guards();
}

void Evaluation::timing() {
  copies_->fill(draws_.first);
  stage(Stage::timing);
  error_[0] = '\0';
  int code = 0;
  auto timed_call = [&] {
    code = library_.run(&call_);
    if (code != 0) throw TimedCallFailed{};
  };
  std::optional<ClockReading> before;
  if (sensor_) before = sensor_->read();
  TimingReport report;
  SecondClockReport second;
  verification_calls(Stage::timing, kVerificationCallsBefore, /*keep_outputs=*/true, second);
  second.before_calls = static_cast<int>(second.busy_ms.size());
  try {
    report.samples_ms = measure(request_.device, timed_call, hooks(true, ClockMark::timed_begin, ClockMark::timed_end), call_.stream,
                                request_.timing);
  } catch (const TimedCallFailed&) {
    failed(Stage::timing, solution_message("d2k_run", code));
  } catch (const SolutionStop&) {
    throw;
  } catch (const Error& error) {
    // The timer's own device checks: a fault the solution caused in one of the timed calls, or state it
    // left that made the timer's own calls fail (a stream still capturing turns them into graph nodes).
#ifdef D2K_WITH_CUDA
    if (request_.device == Device::cuda)
      if (auto state = call_left_state(stream_->get())) rejected(Stage::timing, *state);
#endif
    if (device_error()) device_broken_ = true;
    failed(Stage::timing, error.what());
  } catch (const std::exception& error) {
    failed(Stage::timing, fmt::format("d2k_run threw an exception: {}", error.what()));
  } catch (...) {
    failed(Stage::timing, "d2k_run threw an exception that is not a std::exception");
  }
  if (sensor_) {
    std::optional<ClockReading> after = sensor_->read();
    report.clocks = before && after ? judge_clocks(*before, *after)
                                    : unavailable_clocks(sensor_->available() ? "NVML could not read the clocks"
                                                                              : sensor_->unavailable());
  }
  stage(Stage::verification);
  verification_calls(Stage::verification, kVerificationCallsAfter, /*keep_outputs=*/false, second);
#ifdef D2K_WITH_CUDA
  if (request_.device == Device::cuda) report.second_clock = second;
#endif
  report.calls = copies_->calls();
  report.rotation_sets = copies_->sets();
  report.rotation_bytes = copies_->bytes();
  report.noop_samples = noop_samples_;
  check_guards();
  evidence_.send(FrameKind::timing, report);
  for (const KeptCall& kept : copies_->kept()) send_outputs(Draw::timed, kept.outputs, kept.call);
  evidence_.send(FrameKind::digests, {{"what", kDigestInputsCopies}, {"digests", copies_->input_digests(request_.digest_key)}});
}

// The solution not called at all, once: its tensors prepared as for a call, then a pause. Outputs that
// change meanwhile come from somewhere else than the call (a kernel left running on another context, a
// thread, a mapping), and so would the outputs of the calls that were timed.
void Evaluation::noop_call() {
  d2k_call probe = call_;
  copies_->before_call(probe);
  const auto& outputs = copies_->current_outputs();
  const auto& poison = copies_->spare_outputs();
  std::vector<uint64_t> expected;
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    if (request_.outputs[o].inplace) {
      expected.push_back(outputs[o]->digest(request_.digest_key));
    } else {
      poison[o]->fill(0xFF);
      expected.push_back(poison[o]->digest(request_.digest_key));
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (auto fault = device_error()) failed(Stage::noop_call, fmt::format("a device error while no call ran: {}", *fault));
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    if (outputs[o]->digest(request_.digest_key) != expected[o]) {
      rejected(Stage::noop_call, fmt::format("output '{}' changed while d2k_run was not called: the outputs come from "
                                             "somewhere else than the call (a kernel or thread left running?)",
                                             request_.outputs[o].name));
    }
  }
  after_call(Stage::noop_call);
}

// Before the `end` frame: after it, none of the solution's code runs (end_worker), and nothing it does
// here can change the evidence already sent.
void Evaluation::release() {
  if (!prepared_ok_ || library_.release == nullptr) return;
  std::string failure;
  try {
    library_.release(prepared_);
  } catch (const std::exception& error) {
    failure = fmt::format("d2k_release threw an exception: {}", error.what());
  } catch (...) {
    failure = "d2k_release threw an exception that is not a std::exception";
  }
  if (!failure.empty()) evidence_.send(FrameKind::failure, WorkerFailure{WorkerStatus::runtime_error, Stage::release, failure});
}

// cuda: a few more calls (`calls`, in `stage`), each between events as in the timed loop, under the second
// clock (CUPTI's records of the device's work), added to `second`: the orchestrator compares the two
// (eval/checks.cpp). They are timed calls like the others: patched, checked after, and their outputs may
// come back; with `keep_outputs` they always do. Run before the timed loop and after it
// (kVerificationCallsBefore says why).
void Evaluation::verification_calls(Stage stage, int calls, bool keep_outputs, SecondClockReport& second) {
#ifdef D2K_WITH_CUDA
  if (request_.device != Device::cuda) return;
  if (!kernel_clock_) {
    second.unavailable = kernel_clock_unavailable_;
    return;
  }
  kernel_clock_->resume();
  CudaEvent start, end;
  for (int i = 0; i < calls; ++i) {
    copies_->before_call(call_);
    before_call();
    kernel_clock_->begin_window(stream_->get());
    check_cuda(cudaEventRecord(start.get(), stream_->get()), "cudaEventRecord");
    const int code = library_.run(&call_);
    check_cuda(cudaEventRecord(end.get(), stream_->get()), "cudaEventRecord");
    if (auto left = leftover_threads(threads_before_)) rejected(stage, *left);
    check_device_after(stage, "d2k_run");
    kernel_clock_->end_window();
    if (code != 0) failed(stage, solution_message("d2k_run", code));
    second.event_ms.push_back(elapsed_ms(start, end));
    after_call(stage);
    copies_->after_call(keep_outputs);
  }
  const KernelClockReport seen = kernel_clock_->collect();
  kernel_clock_->pause();
  second.available = true;
  for (const KernelWindow& window : seen.windows) {
    second.busy_ms.push_back(static_cast<double>(window.busy_ns) * 1e-6);
    second.other_context += window.other_context;
  }
  second.between_calls += seen.kernels_between_windows;
  second.contexts_created.insert(second.contexts_created.end(), seen.contexts_created.begin(),
                                 seen.contexts_created.end());
#else
  (void)stage, (void)calls, (void)keep_outputs, (void)second;
#endif
}

// Before every call, untimed: nothing pinned in the persisting L2 by an earlier call survives.
void Evaluation::before_call() {
#ifdef D2K_WITH_CUDA
  if (request_.device == Device::cuda) reset_persisting_l2();
#endif
}

template <typename Call>
void Evaluation::call_solution(Stage stage, const char* entry, Call&& call) {
  before_call();
  error_[0] = '\0';
  int code = 0;
  try {
    code = call();
  } catch (const std::exception& error) {
    failed(stage, fmt::format("{} threw an exception: {}", entry, error.what()));
  } catch (...) {
    failed(stage, fmt::format("{} threw an exception that is not a std::exception", entry));
  }
  check_device_after(stage, entry);
  if (request_.python)
    if (auto refused = triton_refused_import()) rejected(stage, *refused);
  if (code != 0) failed(stage, solution_message(entry, code));
  after_call(stage, entry);
}

void Evaluation::after_call(Stage stage, const char* entry) {
  // The timed calls' copies (up to 64 sets of every tensor, 128 KB of guards each) are not the call's
  // buffers before the timing: their guards are read after the timed calls and at a failure, where a
  // write into them, from any stage, shows. Reading them after every call cost 30-40 ms a step on the
  // H200 (hundreds of small device-to-host copies) and 15 ms on the cpu device. The timed and seeded
  // calls check every guard once after their loop (a guard written stays written).
  if (stage != Stage::timing && stage != Stage::verification && stage != Stage::seeded) check_guards(false);
  if (auto threads = leftover_threads(threads_before_, entry)) rejected(stage, *threads);
  if (auto library = forbidden_library_loaded()) rejected(stage, *library);
  if (request_.python)
    if (auto refused = triton_refused_import()) rejected(stage, *refused);
#ifdef D2K_WITH_CUDA
  if (request_.device == Device::cuda)
    if (auto state = call_left_state(stream_->get())) rejected(stage, *state);
#endif
}

std::string Evaluation::solution_message(const char* entry, int code) {
  error_[D2K_ERROR_CAPACITY - 1] = '\0';  // the solution may have filled it without a terminator
  std::string text(error_);
  if (text.empty()) return fmt::format("{} returned {} without a message", entry, code);
  return fmt::format("{} returned {}: {}", entry, code, text);
}

std::optional<std::string> Evaluation::device_error() {
#ifdef D2K_WITH_CUDA
  if (request_.device == Device::cuda) {
    cudaError_t error = cudaDeviceSynchronize();
    if (error == cudaSuccess) error = cudaGetLastError();
    if (error != cudaSuccess) {
      // Most faults a kernel causes (illegal address, trap) poison the context for good.
      device_broken_ = cudaDeviceSynchronize() != cudaSuccess;
      return cuda_error_text(error);
    }
  }
#endif
  return std::nullopt;
}

// After a call of the solution: a device error fails the evaluation, but when the call left a stream
// capturing a graph, the worker's own synchronization is what failed (cudaErrorStreamCaptureUnsupported),
// and the capture is the finding, rejected by name (as the timed loop does). A fault of the solution's
// own (an illegal address) stays a runtime error.
void Evaluation::check_device_after(Stage stage, const char* entry) {
  const std::optional<std::string> fault = device_error();
  if (!fault) return;
#ifdef D2K_WITH_CUDA
  if (auto capture = capture_left_on(stream_->get())) rejected(stage, *capture);
#endif
  failed(stage, fmt::format("{} caused a device error: {}", entry, *fault));
}

void Evaluation::check_guards(bool copies) {
  std::vector<const GuardedBuffer*> all;
  for (const auto& buffer : buffers_) all.push_back(buffer.get());
  if (copies && copies_) {
    for (const GuardedBuffer* buffer : copies_->buffers()) all.push_back(buffer);
  }
  for (const GuardedBuffer* buffer : all) {
    for (const GuardViolation& found : buffer->check_guards()) {
      auto same = [&](const GuardViolation& known) { return known.tensor == found.tensor && known.side == found.side; };
      auto known = std::find_if(guard_violations_.begin(), guard_violations_.end(), same);
      if (known == guard_violations_.end()) {
        guard_violations_.push_back(found);
      } else {
        known->bytes = std::max(known->bytes, found.bytes);
      }
    }
  }
}

void Evaluation::upload(const std::vector<std::string_view>& draw, bool prepare_visible_only) {
  for (std::size_t i = 0; i < request_.inputs.size(); ++i)
    if (!prepare_visible_only || request_.inputs[i].prepare) buffers_[i]->upload(draw[i]);
}

// NaN for floats, -1 for integers; in-place outputs are their inputs, uploaded instead; the workspace too.
void Evaluation::poison_outputs() {
  for (std::size_t i = 0; i < request_.outputs.size(); ++i)
    if (!request_.outputs[i].inplace) output_buffers_[i]->fill(0xFF);
  if (workspace_) workspace_->fill(0xFF);
}

std::vector<const GuardedBuffer*> Evaluation::output_buffers() const {
  return {output_buffers_.begin(), output_buffers_.end()};
}

void Evaluation::send_outputs(Draw draw, const std::vector<const GuardedBuffer*>& buffers, int64_t call) {
  std::vector<RawSource> parts;
  for (const GuardedBuffer* buffer : buffers)
    parts.push_back({buffer->bytes(), [buffer](const ByteSink& sink) { buffer->read_out(sink); }});
  nlohmann::json fields = {{"draw", name_of(draw)}, {"guard_violations", guard_violations_}};
  if (call >= 0) fields["call"] = call;
  evidence_.send(FrameKind::outputs, fields, parts);
}

// The read-only inputs as the solution left them, digested: the orchestrator compares them with the
// digests of what it sent (inputs are read-only but for the in-place outputs).
void Evaluation::send_input_digests(std::string_view what) {
  std::vector<uint64_t> digests;
  for (std::size_t i = 0; i < request_.inputs.size(); ++i)
    if (!inplace_output(request_, request_.inputs[i])) digests.push_back(buffers_[i]->digest(request_.digest_key));
  evidence_.send(FrameKind::digests, {{"what", what}, {"digests", digests}});
}

}  // namespace

int worker_main(int argc, char** argv) {
  if (argc != 1) {
    std::cerr << "usage: d2k-worker (the orchestrator writes the request to its stdin; docs/integrity.md)\n";
    return 2;
  }
  WorkerRequest request;
  std::optional<Token> token;
  ControlChannel control;
  try {
    take_channels();
    const Frame first = control.read();
    if (first.kind != FrameKind::request) fail("the control stream does not start with a request");
    request = nlohmann::json::parse(first.fields).get<WorkerRequest>();
    check_request(request);
    token = parse_token(request.token);
  } catch (const std::exception& error) {
    std::cerr << "d2k-worker: bad request: " << error.what() << "\n";
    return 2;
  }
  EvidenceChannel evidence(*token);
  Evaluation evaluation(std::move(request), control, evidence);
  try {
    evidence.send(FrameKind::stage, {{"stage", Stage::setup}, {"seconds", 0.0}});
    evaluation.setup();
  } catch (const std::exception& error) {
    std::cerr << "d2k-worker: cannot set up: " << error.what() << "\n";
    return 3;
  }
  try {
    evaluation.wait_for_draws();
  } catch (const std::exception& error) {
    std::cerr << "d2k-worker: bad draws: " << error.what() << "\n";
    return 2;
  }
  try {
    evaluation.run();
  } catch (const std::exception& error) {
    std::cerr << "d2k-worker: " << error.what() << "\n";
    end_worker(3);
  }
  end_worker(0);
}

}  // namespace d2k
