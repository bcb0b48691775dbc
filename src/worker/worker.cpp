#include "worker/worker.hpp"

#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "core/error.hpp"
#include "core/json.hpp"
#include "timing/cuda_util.hpp"
#include "timing/device_info.hpp"
#include "timing/gpu_clocks.hpp"
#include "timing/timer.hpp"
#include "worker/buffers.hpp"
#include "worker/byte_compare.hpp"
#include "worker/library.hpp"
#include "worker/request.hpp"
#include "worker/rotation.hpp"
#include "worker/sent_files.hpp"
#include "worker/threads.hpp"

namespace fs = std::filesystem;

namespace d2k {
namespace {

// The solution failed: it becomes a runtime_error result, with the phase it failed in.
struct SolutionFailure {
  std::string phase;
  std::string message;
};

// The solution was caught doing what it must not: a rejected result, with the phase it was caught in.
struct SolutionRejected {
  std::string phase;
  std::string message;
};

// Thrown out of a timed call so that the timer stops at the first failing call.
struct TimedCallFailed {};

void write_text(const fs::path& file, const std::string& text) {
  // Beside and renamed: whoever reads it after a crash sees a whole file or the previous one. A temp
  // file the solution made first (a link elsewhere, a file it holds open) goes first: ours is new.
  fs::path temp = file;
  temp += ".tmp";
  fs::remove(temp);
  {
    std::ofstream out(temp, std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out) fail("cannot write {}", temp.string());
  }
  fs::rename(temp, file);
}

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

// The shared objects loaded in this process, by path.
std::set<std::string> loaded_objects() {
  std::set<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0')
          static_cast<std::set<std::string>*>(out)->insert(info->dlpi_name);
        return 0;
      },
      &paths);
  return paths;
}

// Libraries that do a task's work for it (or are the reference's own): a solution that loads one at
// run time, past the build's link line, is calling what the task does not allow. The driver may load
// helpers of its own lazily, so this is a list of what is forbidden, not of what is allowed.
constexpr std::array<std::string_view, 12> kForbiddenLibraries = {
    "libtorch", "libc10", "libcublas", "libcudnn", "libcufft", "libcusparse",
    "libcusolver", "libcurand", "libnccl", "libcutlass", "libtriton", "libmkl"};

std::optional<std::string> forbidden_library(const std::string& path) {
  const std::string file = fs::path(path).filename().string();
  for (std::string_view name : kForbiddenLibraries)
    if (file.rfind(name, 0) == 0) return file;
  return std::nullopt;
}

// The threads of this process, as the kernel lists them.
int thread_count() {
  std::error_code error;
  int count = 0;
  for (fs::directory_iterator it("/proc/self/task", error), end; !error && it != end; it.increment(error)) ++count;
  return count;
}

// The orchestrator's token (worker_protocol.hpp: WorkerResult::token): stdin up to end of file, read
// before the solution is loaded. Stdin is then /dev/null, so that the solution finds neither the token
// nor the pipe it came through. Empty when stdin is a terminal: a person running the worker by hand.
std::string read_token() {
  constexpr std::size_t kMaxBytes = 256;
  std::string token;
  if (::isatty(STDIN_FILENO) == 0) {
    char buffer[kMaxBytes + 1];
    while (token.size() <= kMaxBytes) {
      const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
      if (n > 0) {
        token.append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        break;
      }
    }
  }
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0 || ::dup2(null, STDIN_FILENO) < 0) fail("cannot put /dev/null on stdin: {}", std::strerror(errno));
  ::close(null);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.size() > kMaxBytes) fail("the token on stdin is longer than {} bytes", kMaxBytes);
  return token;
}

// How the worker ends once the solution is loaded: no atexit handler or static destructor of the
// solution's runs after result.json is written, and no stdio buffer it left unflushed is written out
// (one could hold a file it opened under result.json's name); only the worker's own streams are.
[[noreturn]] void end_worker(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(code);
}

class Evaluation {
 public:
  Evaluation(WorkerRequest request, fs::path dir, std::string token)
      : request_(std::move(request)), dir_(std::move(dir)), sent_(dir_) {
    result_.token = std::move(token);
  }

  // The worker's own preparation: device, stream, buffers. A failure here is not the solution's.
  void setup();
  // Runs the solution's phases, releases what it prepared and writes result.json last; throws only for
  // the worker's own failures.
  void run();

 private:
  void load();
  void workspace();
  void prepare();
  void correctness();
  void second_draw();
  void timing();
  void release();

  // Calls into the solution, turning a non-zero return, a C++ exception or a device fault into a
  // SolutionFailure of the phase.
  template <typename Call>
  void call_solution(const std::string& phase, const char* entry, Call&& call);
  std::optional<std::string> device_error();
  std::string solution_message(const char* entry, int code);
  void check_guards();
  // Ends the current step of the worker's own (result.phases) and starts the next.
  void end_phase(const char* name);
  void check_leftovers(const std::string& phase);
  void check_threads(const std::string& phase);
  void check_libraries(const std::string& phase);
  void upload_inputs(const std::vector<std::string>& files);
  void poison_outputs();
  void write_outputs(const std::vector<GuardedBuffer*>& buffers, const std::string& suffix = "");
  void write_inputs_after(const std::vector<std::string>& files);
  std::vector<std::string> first_inputs() const;
  void write_result();

  WorkerRequest request_;
  fs::path dir_;
  SentFiles sent_;
  WorkerResult result_;
  std::chrono::steady_clock::time_point phase_start_ = std::chrono::steady_clock::now();
  std::unique_ptr<Rotation> rotation_;
  SolutionLibrary library_;
  uint64_t seed_ = unpredictable_seed();
#ifdef D2K_WITH_CUDA
  std::unique_ptr<CudaStream> stream_;
#endif
  std::vector<std::unique_ptr<GuardedBuffer>> buffers_;  // inputs, outputs not in place, workspace
  std::vector<GuardedBuffer*> output_buffers_;           // one per output, in request order
  std::vector<d2k_tensor> inputs_, outputs_;
  std::vector<d2k_scalar> scalars_;
  char error_[D2K_ERROR_CAPACITY] = {};
  d2k_call call_{};
  void* prepared_ = nullptr;
  bool prepared_ok_ = false;
  bool device_broken_ = false;  // a sticky device fault: nothing more can be read from it
  int threads_before_ = 0;      // before the solution was loaded: the worker's own and the runtime's
};

void Evaluation::setup() {
  Device device = request_.device;
  result_.device_name = device_name(device);
  void* stream = nullptr;
#ifdef D2K_WITH_CUDA
  if (device == Device::cuda) {
    check_cuda(cudaFree(nullptr), "creating the CUDA context");
    stream_ = std::make_unique<CudaStream>();
    stream = stream_->get();
  }
#endif
  for (const auto& input : request_.inputs) {
    auto buffer = std::make_unique<GuardedBuffer>(device, input.name, span_bytes(input), seed_);
    buffer->upload(sent_.bytes(input.file));
    inputs_.push_back(abi_tensor(input, buffer->data()));
    buffers_.push_back(std::move(buffer));
  }
  for (const auto& output : request_.outputs) {
    GuardedBuffer* buffer = nullptr;
    if (const WireTensor* input = inplace_input(request_, output)) {
      buffer = buffers_[static_cast<std::size_t>(input - request_.inputs.data())].get();
    } else {
      // Poisoned: NaN for floats, -1 for integers; whatever the solution leaves unwritten stays wrong.
      auto owned = std::make_unique<GuardedBuffer>(device, output.name, span_bytes(output), seed_);
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
  call_.stream = stream;
  call_.error = error_;
  if (!request_.second_inputs.empty() && request_.second_inputs.size() != request_.inputs.size())
    fail("the request has {} second inputs for {} inputs", request_.second_inputs.size(), request_.inputs.size());
#ifdef D2K_WITH_CUDA
  // The runtime's own threads start with the context and its first copies, all done by now.
  if (device == Device::cuda) check_cuda(cudaDeviceSynchronize(), "synchronizing after setup");
#endif
  threads_before_ = thread_count();
  start_counting_threads();
}

void Evaluation::run() {
  end_phase("setup");
  try {
    load();
    workspace();
    prepare();
    end_phase("load");
    correctness();
    end_phase("correctness");
    if (request_.time) timing();
    result_.status = "ok";
    result_.phase = "done";
    result_.message.clear();
  } catch (const SolutionFailure& failure) {
    result_.status = "runtime_error";
    result_.phase = failure.phase;
    result_.message = failure.message;
  } catch (const SolutionRejected& rejected) {
    result_.status = "rejected";
    result_.phase = rejected.phase;
    result_.message = rejected.message;
  }
  release();
  write_result();
}

void Evaluation::load() {
  // A relative library path, like the tensor files, is relative to the request's folder.
  fs::path library = request_.library;
  if (library.is_relative()) library = dir_ / library;
  try {
    library_ = load_library(library.string());
  } catch (const Error& error) {
    throw SolutionFailure{"load", error.what()};
  }
  check_libraries("load");
}

void Evaluation::workspace() {
  if (library_.workspace_size == nullptr) return;
  std::size_t bytes = 0;
  call_solution("workspace", "d2k_workspace_size", [&] { return library_.workspace_size(&call_, &bytes); });
  if (bytes == 0) return;
  try {
    auto buffer = std::make_unique<GuardedBuffer>(request_.device, "workspace", bytes, seed_);
    buffer->fill(0xFF);
    call_.workspace = buffer->data();
    call_.workspace_bytes = bytes;
    buffers_.push_back(std::move(buffer));
  } catch (const Error& error) {
    throw SolutionFailure{"workspace",
                          fmt::format("the {} bytes of workspace asked for: {}", bytes, error.what())};
  }
}

void Evaluation::prepare() {
  if (library_.prepare == nullptr) return;
  call_solution("prepare", "d2k_prepare", [&] { return library_.prepare(&call_, &prepared_); });
  prepared_ok_ = true;
  call_.prepared = prepared_;
}

void Evaluation::correctness() {
  if (!request_.second_inputs.empty()) {
    second_draw();
    end_phase("second_draw");
  }
  call_solution("run", "d2k_run", [&] { return library_.run(&call_); });
  check_guards();
  check_leftovers("run");
  write_outputs(output_buffers_);
  write_inputs_after(first_inputs());
}

// The second draw runs first, in the very buffers the first draw then fills: a solution that keys a
// cache on the addresses it is handed returns the second draw's outputs for the first, which the
// orchestrator's check of the first draw sees. For a deterministic task, the second draw runs twice on the same
// bytes, outputs poisoned before each run, and the two runs' outputs are compared bytewise on the device
// (like every timed call's, rotation.hpp): outputs that read memory the solution did not write differ.
void Evaluation::second_draw() {
  upload_inputs(request_.second_inputs);
  poison_outputs();
  call_solution("second_draw", "d2k_run", [&] { return library_.run(&call_); });
  check_guards();
  check_leftovers("second_draw");
  write_outputs(output_buffers_, ".second");
  if (request_.deterministic) {
    std::vector<std::unique_ptr<GuardedBuffer>> first_run;
    for (const GuardedBuffer* output : output_buffers_) {
      first_run.push_back(std::make_unique<GuardedBuffer>(request_.device, output->name(), output->bytes(), seed_));
      first_run.back()->copy_from(*output);
    }
    upload_inputs(request_.second_inputs);  // in-place outputs changed them
    poison_outputs();
    call_solution("repeat", "d2k_run", [&] { return library_.run(&call_); });
    check_guards();
    check_leftovers("repeat");
    ByteCompare differing_bytes;
    for (std::size_t i = 0; i < output_buffers_.size(); ++i) {
      if (const std::size_t differ = differing_bytes(*output_buffers_[i], *first_run[i]); differ != 0) {
        throw SolutionRejected{
            "repeat", fmt::format("output '{}' changed between two runs on the same inputs ({} of {} bytes differ); "
                                  "the task is deterministic, so the outputs must not depend on anything but the "
                                  "inputs",
                                  request_.outputs[i].name, differ, output_buffers_[i]->bytes())};
      }
    }
  }
  write_inputs_after(request_.second_inputs);
  upload_inputs(first_inputs());
  poison_outputs();
}


void Evaluation::timing() {
  // The outputs are on disk: a crash or a hang while timing still leaves them to be checked.
  result_.status = "ok";
  result_.phase = "timing";
  write_result();
  CallTensors copy0{{}, output_buffers_, inputs_, outputs_};
  for (std::size_t i = 0; i < request_.inputs.size(); ++i) copy0.inputs.push_back(buffers_[i].get());
  rotation_ = std::make_unique<Rotation>(request_, sent_, seed_, std::move(copy0));
  result_.rotation_sets = rotation_->sets();
  result_.rotation_bytes = rotation_->bytes();
  // Opening NVML takes a while; it belongs to the set-up, not to the timing.
  std::unique_ptr<ClockSensor> sensor;
  if (request_.device == Device::cuda) sensor = std::make_unique<ClockSensor>();
  end_phase("rotation");

  error_[0] = '\0';
  int code = 0;
  bool thread_left = false;
  auto timed_call = [&] {
    code = library_.run(&call_);
    if (code != 0) throw TimedCallFailed{};
    thread_left = thread_left || threads_running() > 0;  // one atomic load: no cost worth timing
  };
  // Every call, warm-up included, gets a restored, poisoned copy of its own, and its outputs are
  // compared with the correctness call's: a solution that computes once, or is wrong only sometimes,
  // fails however the calls fall.
  CallHooks hooks{[&] { rotation_->before_call(call_); }, [&] { rotation_->after_call(); }};
  std::optional<ClockReading> before;
  if (sensor) before = sensor->read();
  try {
    result_.samples_ms = measure(request_.device, timed_call, hooks, call_.stream, request_.timing);
  } catch (const TimedCallFailed&) {
    throw SolutionFailure{"timing", solution_message("d2k_run", code)};
  } catch (const Error& error) {
    // The timer's own device checks: a fault the solution caused in one of the timed calls.
    if (device_error()) device_broken_ = true;
    throw SolutionFailure{"timing", error.what()};
  } catch (const std::exception& error) {
    throw SolutionFailure{"timing", fmt::format("d2k_run threw an exception: {}", error.what())};
  } catch (...) {
    throw SolutionFailure{"timing", "d2k_run threw an exception that is not a std::exception"};
  }
  if (sensor) {
    std::optional<ClockReading> after = sensor->read();
    result_.clocks = before && after ? judge_clocks(*before, *after)
                                     : unavailable_clocks(sensor->available() ? "NVML could not read the clocks"
                                                                              : sensor->unavailable());
  }
  end_phase("timing");
  // The output files now get the last timed call's outputs, which the orchestrator checks against the
  // oracle too (for an op that is not deterministic, the only check of a timed call).
  call_.inputs = inputs_.data();
  call_.outputs = outputs_.data();
  rotation_->check_inputs();
  result_.timed_check = rotation_->check();
  check_guards();
  if (thread_left)
    throw SolutionRejected{"timing", "left a thread running after a timed call of d2k_run returned; work must be "
                                     "done, and its threads ended, within the call"};
  check_leftovers("timing");
  // A deterministic task's timed calls were compared bytewise with the checked call above; any other
  // task's last timed call goes back in a file of its own for the orchestrator to check, beside the
  // checked call's outputs (which stay what the orchestrator checks first).
  if (!request_.deterministic) write_outputs(rotation_->last_outputs(), ".timed");
  write_inputs_after(first_inputs());
  end_phase("finish");
}

// Before the last write of result.json: after it, none of the solution's code runs (end_worker).
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
  if (!failure.empty() && result_.status == "ok") {
    result_.status = "runtime_error";
    result_.phase = "release";
    result_.message = failure;
  }
}

template <typename Call>
void Evaluation::call_solution(const std::string& phase, const char* entry, Call&& call) {
  error_[0] = '\0';
  int code = 0;
  try {
    code = call();
  } catch (const std::exception& error) {
    throw SolutionFailure{phase, fmt::format("{} threw an exception: {}", entry, error.what())};
  } catch (...) {
    throw SolutionFailure{phase, fmt::format("{} threw an exception that is not a std::exception", entry)};
  }
  std::optional<std::string> fault = device_error();
  if (fault) {
    // Guards are still worth reading after an ordinary error, not after a sticky fault.
    if (!device_broken_) check_guards();
    throw SolutionFailure{phase, fmt::format("{} caused a device error: {}", entry, *fault)};
  }
  if (code != 0) {
    check_guards();
    throw SolutionFailure{phase, solution_message(entry, code)};
  }
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

void Evaluation::check_guards() {
  std::vector<const GuardedBuffer*> all;
  for (const auto& buffer : buffers_) all.push_back(buffer.get());
  if (rotation_) {
    for (const GuardedBuffer* buffer : rotation_->buffers()) all.push_back(buffer);
  }
  for (const GuardedBuffer* buffer : all) {
    for (const GuardViolation& found : buffer->check_guards()) {
      auto same = [&](const GuardViolation& known) {
        return known.tensor == found.tensor && known.side == found.side;
      };
      auto known = std::find_if(result_.guard_violations.begin(), result_.guard_violations.end(), same);
      if (known == result_.guard_violations.end()) {
        result_.guard_violations.push_back(found);
      } else {
        known->bytes = std::max(known->bytes, found.bytes);
      }
    }
  }
}

void Evaluation::end_phase(const char* name) {
  const auto now = std::chrono::steady_clock::now();
  result_.phases.push_back({name, std::chrono::duration<double>(now - phase_start_).count()});
  phase_start_ = now;
}

void Evaluation::check_leftovers(const std::string& phase) {
  check_threads(phase);
  check_libraries(phase);
}

// What the solution linked was checked when it loaded (`load`); what it opens itself shows here.
void Evaluation::check_libraries(const std::string& phase) {
  for (const std::string& path : loaded_objects()) {
    if (auto library = forbidden_library(path)) {
      throw SolutionRejected{phase, fmt::format("loaded {} ({}); a solution may use no library that does the "
                                                "task's work (torch, cuBLAS, cuDNN, ...)",
                                                *library, path)};
    }
  }
}

// A solution may do its work in threads of its own, but none may outlive the call: a thread left
// running can compute the outputs after the call returned (or while the next call is timed), where
// no timer sees it. Threads started through pthread_create are counted exactly (threads.hpp); the
// count of /proc/self/task catches the others, with a moment's grace for a joined thread that the
// kernel has not yet removed from the list.
void Evaluation::check_threads(const std::string& phase) {
  if (const int running = threads_running(); running > 0) {
    throw SolutionRejected{phase, fmt::format("left {} thread(s) running after d2k_run returned; work must be done, "
                                              "and its threads ended, within the call",
                                              running)};
  }
  int now = thread_count();
  for (int retry = 0; retry < 2 && now > threads_before_; ++retry) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    now = thread_count();
  }
  if (now <= threads_before_) return;
  throw SolutionRejected{
      phase, fmt::format("left {} thread(s) running after d2k_run returned ({} before the solution was loaded, {} "
                         "after); work must be done, and its threads ended, within the call",
                         now - threads_before_, threads_before_, now)};
}

void Evaluation::upload_inputs(const std::vector<std::string>& files) {
  for (std::size_t i = 0; i < files.size(); ++i) buffers_[i]->upload(sent_.bytes(files[i]));
}

// NaN for floats, -1 for integers; in-place outputs are their inputs, uploaded instead.
void Evaluation::poison_outputs() {
  for (std::size_t i = 0; i < request_.outputs.size(); ++i)
    if (!request_.outputs[i].inplace) output_buffers_[i]->fill(0xFF);
}

std::vector<std::string> Evaluation::first_inputs() const {
  std::vector<std::string> files;
  for (const auto& input : request_.inputs) files.push_back(input.file);
  return files;
}

void Evaluation::write_outputs(const std::vector<GuardedBuffer*>& buffers, const std::string& suffix) {
  for (std::size_t i = 0; i < request_.outputs.size(); ++i) {
    write_text(dir_ / (request_.outputs[i].file + suffix), buffers[i]->download());
  }
}

// The inputs as the solution left them, for the orchestrator to compare with what it sent (`files`,
// one per input; inputs are read-only but for the in-place outputs). The comparison happens there, out
// of the solution's reach.
void Evaluation::write_inputs_after(const std::vector<std::string>& files) {
  for (std::size_t i = 0; i < request_.inputs.size(); ++i) {
    if (inplace_output(request_, request_.inputs[i])) continue;
    write_text(dir_ / (files[i] + ".after"), buffers_[i]->download());
  }
}

void Evaluation::write_result() { write_text(dir_ / "result.json", nlohmann::json(result_).dump(2) + "\n"); }

}  // namespace

int run_worker(const fs::path& request_file) {
  std::string token;
  try {
    token = read_token();
  } catch (const std::exception& error) {
    std::cerr << "d2k-worker: bad token: " << error.what() << "\n";
    return 2;
  }
  // A result left from an earlier run must not pass for this one's.
  std::error_code ignored;
  fs::remove(request_file.parent_path() / "result.json", ignored);
  WorkerRequest request;
  try {
    request = load_request(request_file);
  } catch (const std::exception& error) {
    std::cerr << "d2k-worker: bad request: " << error.what() << "\n";
    return 2;
  }
  Evaluation evaluation(std::move(request), request_file.parent_path(), std::move(token));
  try {
    evaluation.setup();
  } catch (const std::exception& error) {
    std::cerr << "d2k-worker: cannot set up: " << error.what() << "\n";
    return 3;
  }
  try {
    evaluation.run();
  } catch (const std::exception& error) {
    std::cerr << "d2k-worker: " << error.what() << "\n";
    end_worker(3);
  }
  end_worker(0);
}

int worker_main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: d2k-worker <request.json>\n";
    return 2;
  }
  return run_worker(argv[1]);
}

}  // namespace d2k
