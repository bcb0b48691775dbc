#include "runner/worker_run.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <random>
#include <set>
#include <utility>

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/overhead.hpp"

namespace fs = std::filesystem;

namespace d2k {
namespace {

// A fresh folder for one worker, its working directory; removed when it goes out of scope.
class ScratchDir {
 public:
  explicit ScratchDir(const fs::path& parent) {
    path_ = parent / fmt::format("worker-{:016x}", random_u64());
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The input draws in a memory file (kChildInputsFd), made before the worker starts and filled once the
// draws are made (the worker sets up meanwhile): written with pwrite, then sealed against any write,
// growth or shrink before the control stream says where the draws lie, so that neither the worker nor
// the solution can change what the orchestrator checks against, and the worker never maps a file still
// being filled (it checks the seals). The child gets a read-only descriptor of its own, so it cannot write
// the file before the seals either. Closed when it goes out of scope (the child has its own by then).
class InputsFile {
 public:
  InputsFile() {
    fd_ = ::memfd_create("d2k-inputs", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd_ < 0) fail("memfd_create: {}", std::strerror(errno));
    read_only_ = ::open(fmt::format("/proc/self/fd/{}", fd_).c_str(), O_RDONLY | O_CLOEXEC);
    if (read_only_ < 0) {
      ::close(fd_);
      fail("opening the inputs file read-only: {}", std::strerror(errno));
    }
  }
  InputsFile(const InputsFile&) = delete;
  InputsFile& operator=(const InputsFile&) = delete;
  ~InputsFile() {
    ::close(read_only_);
    ::close(fd_);
  }

  // The child's descriptor: read-only.
  int child_fd() const { return read_only_; }

  // Both draws, one input after another, then the seals. Once only.
  void fill(const DrawPair& draws) {
    std::size_t total = 0;
    for (const DrawBytes* draw : {&draws.first, &draws.second})
      for (auto bytes : *draw) total += bytes.size();
    if (::ftruncate(fd_, static_cast<off_t>(total)) != 0) fail("ftruncate of the inputs file: {}", std::strerror(errno));
    std::size_t at = 0;
    for (const DrawBytes* draw : {&draws.first, &draws.second}) {
      std::vector<std::size_t> offsets;
      for (auto bytes : *draw) {
        offsets.push_back(at);
        for (std::size_t done = 0; done < bytes.size();) {
          const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(at + done));
          if (n <= 0) fail("writing the inputs file: {}", std::strerror(errno));
          done += static_cast<std::size_t>(n);
        }
        at += bytes.size();
      }
      offsets_.push_back(std::move(offsets));
    }
    if (::fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
      fail("sealing the inputs file: {}", std::strerror(errno));
  }
  std::size_t offset(int draw, std::size_t input) const { return offsets_[static_cast<std::size_t>(draw - 1)][input]; }

 private:
  int fd_ = -1, read_only_ = -1;
  std::vector<std::vector<std::size_t>> offsets_;
};

void check_draws(const WorkerRequest& request, const DrawPair& draws) {
  const std::size_t inputs = request.inputs.size();
  if (draws.first.size() != inputs || (request.second_draw && draws.second.size() != inputs))
    fail("run_worker: {} inputs, {} and {} draws' buffers", inputs, draws.first.size(), draws.second.size());
}

// The control stream: the request frame; once the draws are taken (the worker starts and sets up
// meanwhile) and the inputs file is filled and sealed, one input frame per input of each draw (where its
// bytes lie in the file); then an ack for every clock frame of the worker's.
class ControlStream {
 public:
  ControlStream(const WorkerRequest& request, InputsFile& inputs, TakeDraws take)
      : request_(request), inputs_(inputs), take_(std::move(take)) {
    append(encode_frame(FrameKind::request, seq_++, Token{}, nlohmann::json(request).dump()));
  }

  // What is left to write. Once the request is written, the draws are taken here: this may block until
  // they are made.
  std::string_view next() {
    if (pending_.empty() && take_) send_draws();
    return std::string_view(pending_).substr(sent_);
  }
  void written(std::size_t bytes) {
    sent_ += bytes;
    if (sent_ == pending_.size()) pending_.clear(), sent_ = 0;
  }
  void ack(uint64_t clock_seq) { append(encode_frame(FrameKind::ack, seq_++, Token{}, nlohmann::json({{"seq", clock_seq}}).dump())); }
  // What taking the draws threw: the worker gets nothing more (its stdin closes and it stops).
  const std::exception_ptr& failure() const { return failure_; }

 private:
  void send_draws() {
    const TakeDraws take = std::exchange(take_, nullptr);
    try {
      const DrawPair draws = take();
      check_draws(request_, draws);
      inputs_.fill(draws);
    } catch (...) {
      failure_ = std::current_exception();
      return;
    }
    const auto add_draw = [&](int draw) {
      for (std::size_t i = 0; i < request_.inputs.size(); ++i) {
        const nlohmann::json fields = {{"draw", draw}, {"input", i}, {"offset", inputs_.offset(draw, i)}};
        append(encode_frame(FrameKind::input, seq_++, Token{}, fields.dump()));
      }
    };
    add_draw(1);
    if (request_.second_draw) add_draw(2);
  }
  void append(const std::string& bytes) { pending_ += bytes; }

  const WorkerRequest& request_;
  InputsFile& inputs_;
  TakeDraws take_;
  std::exception_ptr failure_;
  std::string pending_;
  std::size_t sent_ = 0;
  uint64_t seq_ = 0;
};

// Reads the evidence stream and checks every frame as it comes: the token, seq in order with no gap,
// a kind the worker sends, nothing after `end`.
class Evidence : public ProcessConversation {
 public:
  Evidence(ControlStream& control, const Token& token, uint64_t max_payload, std::function<void()> before_first_clock)
      : control_(control), token_(token), reader_(max_payload), before_first_clock_(std::move(before_first_clock)) {}

  std::string_view next_input() override { return control_.next(); }
  bool more_input() const override { return !ended_ && !forged_ && !control_.failure(); }
  void started(pid_t pid) override { pid_ = pid; }
  void input_written(std::size_t bytes) override { control_.written(bytes); }
  void received(const char* data, std::size_t size, double seconds) override {
    if (forged_) return;
    const std::size_t before = frames_.size();
    reader_.feed(data, size, seconds, frames_);
    if (reader_.broken()) return forge(fmt::format("the evidence stream is malformed: {}", *reader_.broken()));
    for (std::size_t i = before; i < frames_.size() && !forged_; ++i) {
      admit(frames_[i]);
      // The outside clock: the worker waits for the ack of a clock frame, so its time on (or waiting for) a
      // CPU read now is that at the mark.
      if (frames_[i].kind == FrameKind::clock && !forged_) {
        // The worker sent nothing after the mark (it waits for the ack): the mark's time moves with the wait.
        frames_[i].arrival_seconds += wait_for_caller();
        frames_[i].cpu_seconds = process_tree_runnable_seconds(pid_);
        control_.ack(frames_[i].seq);
      }
    }
  }

  std::vector<Frame>& frames() { return frames_; }
  const std::optional<std::string>& forged() const { return forged_; }
  bool incomplete() const { return reader_.pending() > 0; }

 private:
  void forge(std::string why) {
    if (!forged_) forged_ = std::move(why);
  }
  // The caller's hook, the first time only; the seconds it took.
  double wait_for_caller() {
    if (!before_first_clock_) return 0;
    const auto started = std::chrono::steady_clock::now();
    std::exchange(before_first_clock_, nullptr)();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  void admit(const Frame& frame) {
    if (frame.token != token_) return forge(fmt::format("frame {} ({}) does not carry the evaluation's token",
                                                        frame.seq, name_of(frame.kind)));
    if (frame.seq != next_seq_)
      return forge(fmt::format("frame {} ({}) arrived where frame {} was due", frame.seq, name_of(frame.kind), next_seq_));
    ++next_seq_;
    if (ended_) return forge(fmt::format("a {} frame arrived after the worker's end", name_of(frame.kind)));
    switch (frame.kind) {
      case FrameKind::stage:
      case FrameKind::clock:
      case FrameKind::outputs:
      case FrameKind::digests:
      case FrameKind::timing:
      case FrameKind::failure:
        break;
      case FrameKind::end:
        ended_ = true;
        break;
      default:
        return forge(fmt::format("frame {} has kind {}, which the worker never sends", frame.seq,
                                 static_cast<uint32_t>(frame.kind)));
    }
  }

  ControlStream& control_;
  Token token_;
  FrameReader reader_;
  std::vector<Frame> frames_;
  std::function<void()> before_first_clock_;
  uint64_t next_seq_ = 0;
  pid_t pid_ = 0;
  bool ended_ = false;
  std::optional<std::string> forged_;
};

// The views of `raw` as the request's outputs, in order; nothing when the sizes do not add up.
std::optional<std::vector<std::string_view>> split_outputs(std::string_view raw, const std::vector<std::size_t>& sizes) {
  std::vector<std::string_view> parts;
  std::size_t at = 0;
  for (std::size_t size : sizes) {
    if (at + size > raw.size()) return std::nullopt;
    parts.push_back(raw.substr(at, size));
    at += size;
  }
  if (at != raw.size()) return std::nullopt;
  return parts;
}

// A worker step as a trace phase: its timing loop is the measurement, the rest is the harness's overhead.
std::string phase_name(Stage stage) {
  return stage == Stage::timing ? kSolutionTimingPhase : "worker_" + std::string(name_of(stage));
}

// The frames, in order, as a report; a frame whose fields do not parse, or that repeats what may come
// once, makes the whole stream untrustworthy (the reason is returned).
std::optional<std::string> build_report(const WorkerRequest& request, WorkerReport& report) {
  std::vector<std::size_t> sizes;
  for (const auto& output : request.outputs) sizes.push_back(span_bytes(output));
  std::set<std::string> once;  // what may appear once only
  const auto first_time = [&](const std::string& what) { return once.insert(what).second; };
  std::optional<double> noop_begin, timed_begin, after_begin, noop_cpu_begin, timed_cpu_begin, after_cpu_begin;
  double last_stage_at = 0;
  for (const Frame& frame : report.frames) {
    nlohmann::json fields;
    try {
      fields = nlohmann::json::parse(frame.fields);
      switch (frame.kind) {
        case FrameKind::stage: {
          const Stage stage = fields.at("stage").get<Stage>();
          if (report.reached && static_cast<int>(stage) <= static_cast<int>(*report.reached))
            return fmt::format("stage {} came after stage {}", name_of(stage), name_of(*report.reached));
          if (report.reached)
            report.phases.push_back({phase_name(*report.reached), fields.at("seconds").get<double>()});
          report.reached = stage;
          last_stage_at = frame.arrival_seconds;
          break;
        }
        case FrameKind::clock: {
          const auto mark = parse_clock_mark(fields.at("mark").get<std::string>());
          if (!mark) return fmt::format("an unknown clock mark {}", fields.at("mark").dump());
          if (!first_time("clock " + std::string(name_of(*mark)))) return fmt::format("clock mark {} twice", name_of(*mark));
          const auto cpu_since = [&](const std::optional<double>& begin) -> std::optional<double> {
            if (!begin || !frame.cpu_seconds) return std::nullopt;
            return *frame.cpu_seconds - *begin;
          };
          if (*mark == ClockMark::noop_begin) noop_begin = frame.arrival_seconds, noop_cpu_begin = frame.cpu_seconds;
          if (*mark == ClockMark::timed_begin) timed_begin = frame.arrival_seconds, timed_cpu_begin = frame.cpu_seconds;
          if (*mark == ClockMark::noop_after_begin) after_begin = frame.arrival_seconds, after_cpu_begin = frame.cpu_seconds;
          if (*mark == ClockMark::noop_end) {
            if (!noop_begin) return std::string("clock mark noop_end before noop_begin");
            report.noop_seconds = frame.arrival_seconds - *noop_begin;
            report.noop_cpu_seconds = cpu_since(noop_cpu_begin);
          }
          if (*mark == ClockMark::timed_end) {
            if (!timed_begin) return std::string("clock mark timed_end before timed_begin");
            report.timed_seconds = frame.arrival_seconds - *timed_begin;
            report.timed_cpu_seconds = cpu_since(timed_cpu_begin);
          }
          if (*mark == ClockMark::noop_after_end) {
            if (!after_begin) return std::string("clock mark noop_after_end before noop_after_begin");
            report.noop_after_seconds = frame.arrival_seconds - *after_begin;
            report.noop_after_cpu_seconds = cpu_since(after_cpu_begin);
          }
          break;
        }
        case FrameKind::outputs: {
          const auto draw = parse_draw(fields.at("draw").get<std::string>());
          if (!draw) return fmt::format("outputs of an unknown draw {}", fields.at("draw").dump());
          if (fields.contains("guard_violations"))
            report.guard_violations = fields.at("guard_violations").get<std::vector<GuardViolation>>();
          auto parts = split_outputs(frame.raw(), sizes);
          if (!parts) return fmt::format("outputs of {} bytes, not the outputs' {}", frame.raw().size(), sizes.size());
          if (*draw == Draw::timed || *draw == Draw::seeded) {
            const int64_t call = fields.at("call").get<int64_t>();
            if (!first_time(fmt::format("{} {}", name_of(*draw), call)))
              return fmt::format("the outputs of {} call {} twice", name_of(*draw), call);
            (*draw == Draw::timed ? report.timed : report.seeded).push_back({call, std::move(*parts)});
          } else {
            if (!first_time("outputs " + std::string(name_of(*draw))))
              return fmt::format("the {} outputs twice", name_of(*draw));
            (*draw == Draw::second ? report.second : report.checked) = std::move(*parts);
          }
          break;
        }
        case FrameKind::digests: {
          const auto what = fields.at("what").get<std::string>();
          if (!first_time("digests " + what)) return fmt::format("digests of {} twice", what);
          report.digests[what] = fields.at("digests").get<std::vector<uint64_t>>();
          break;
        }
        case FrameKind::timing:
          if (!first_time("timing")) return std::string("two timing reports");
          report.timing = fields.get<TimingReport>();
          break;
        case FrameKind::failure:
          if (!first_time("failure")) return std::string("two failures");
          report.failure = fields.get<WorkerFailure>();
          break;
        case FrameKind::end:
          report.ended = true;
          report.device_name = fields.value("device_name", std::string());
          report.guard_violations = fields.value("guard_violations", std::vector<GuardViolation>());
          if (report.reached)
            report.phases.push_back({phase_name(*report.reached), frame.arrival_seconds - last_stage_at});
          break;
        default:
          break;
      }
    } catch (const std::exception& error) {
      return fmt::format("frame {} ({}) has fields that do not parse: {}", frame.seq, name_of(frame.kind), error.what());
    }
  }
  return std::nullopt;
}

Token fresh_token() {
  Token token{};
  for (std::size_t i = 0; i < token.size(); i += 8) {
    const uint64_t bits = random_u64();
    for (std::size_t b = 0; b < 8; ++b) token[i + b] = static_cast<uint8_t>(bits >> (8 * b));
  }
  return token;
}

}  // namespace

uint64_t random_u64() {
  static thread_local std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

WorkerOutcome run_worker(const WorkerLaunch& launch, WorkerRequest request, const TakeDraws& take) {
  const Token token = fresh_token();
  request.token = token_hex(token);

  ScratchDir dir(launch.scratch_dir);
  ProcessSpec spec;
  spec.argv = {launch.worker.string()};
  if (launch.ncu) {
    std::vector<std::string> ncu = {launch.ncu->ncu.string()};
    ncu.insert(ncu.end(), launch.ncu->args.begin(), launch.ncu->args.end());
    ncu.insert(ncu.end(), {"--log-file", (dir.path() / "ncu-report.txt").string()});
    spec.argv.insert(spec.argv.begin(), ncu.begin(), ncu.end());
  }
  spec.cwd = dir.path();
  spec.timeout_seconds = launch.timeout_seconds;
  if (launch.sandbox) {
    spec.sandbox = worker_sandbox(*launch.sandbox, launch.worker, request.library, dir.path(), launch.gpu,
                                  launch.timeout_seconds);
    if (launch.ncu) spec.sandbox->read.insert(spec.sandbox->read.end(), launch.ncu->read.begin(), launch.ncu->read.end());
    // A Triton solution: the embedded CPython's standard library (outside /usr) and Triton's package folder
    // alone, not the site-packages around it (which may hold torch). Its kernels are in the build's entry.
    if (request.python) {
      auto& read = spec.sandbox->read;
      const std::filesystem::path home = request.python->home, library = request.python->library;
      if (!home.string().starts_with("/usr")) read.push_back(home);
      if (!library.string().starts_with("/usr")) read.push_back(library);
      read.push_back(std::filesystem::path(request.python->site) / "triton");
    }
  }

  // The largest frame: every output at once, plus room for the fields.
  uint64_t max_payload = uint64_t{1} << 24;
  for (const auto& output : request.outputs) max_payload += span_bytes(output);

  InputsFile inputs;
  spec.inherit = {{inputs.child_fd(), kChildInputsFd}};
  ControlStream control(request, inputs, take);
  Evidence evidence(control, token, max_payload, launch.before_first_clock);
  WorkerOutcome outcome;
  outcome.process = run_process(spec, &evidence);
  if (control.failure()) std::rethrow_exception(control.failure());
  if (launch.ncu) {
    std::error_code ignored;  // no report: the caller says so, with the worker's log
    fs::copy_file(dir.path() / "ncu-report.txt", launch.ncu->report, fs::copy_options::overwrite_existing, ignored);
  }
  outcome.forged = evidence.forged();
  outcome.report.frames = std::move(evidence.frames());
  if (!outcome.forged) outcome.forged = build_report(request, outcome.report);
  if (outcome.forged) outcome.report = WorkerReport{};
  return outcome;
}

WorkerOutcome run_worker(const WorkerLaunch& launch, WorkerRequest request, const DrawBytes& first,
                         const DrawBytes& second) {
  return run_worker(launch, std::move(request), [&] { return DrawPair{first, second}; });
}

}  // namespace d2k
