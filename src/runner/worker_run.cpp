#include "runner/worker_run.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <random>
#include <set>

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

// The control stream: the request frame, then one input frame per input of each draw. The input bytes
// are not copied: segments point at the caller's draws.
class ControlStream {
 public:
  ControlStream(const WorkerRequest& request, const DrawBytes& first, const DrawBytes& second) {
    uint64_t seq = 0;
    const Token none{};
    add_owned(encode_frame(FrameKind::request, seq++, none, nlohmann::json(request).dump()));
    const auto add_draw = [&](int draw, const DrawBytes& bytes) {
      for (std::size_t i = 0; i < bytes.size(); ++i) {
        const nlohmann::json fields = {{"draw", draw}, {"input", i}};
        add_owned(encode_frame_head(FrameKind::input, seq++, none, fields.dump(), bytes[i].size()));
        segments_.push_back(bytes[i]);
      }
    };
    add_draw(1, first);
    if (request.second_draw) add_draw(2, second);
  }

  std::string_view next() {
    while (current_ < segments_.size() && offset_ == segments_[current_].size()) ++current_, offset_ = 0;
    if (current_ == segments_.size()) return {};
    return segments_[current_].substr(offset_);
  }
  void written(std::size_t bytes) { offset_ += bytes; }

 private:
  void add_owned(std::string bytes) {
    owned_.push_back(std::make_unique<std::string>(std::move(bytes)));
    segments_.push_back(*owned_.back());
  }
  std::vector<std::unique_ptr<std::string>> owned_;
  std::vector<std::string_view> segments_;
  std::size_t current_ = 0, offset_ = 0;
};

// Reads the evidence stream and checks every frame as it comes: the token, seq in order with no gap,
// a kind the worker sends, nothing after `end`.
class Evidence : public ProcessConversation {
 public:
  Evidence(ControlStream& control, const Token& token, uint64_t max_payload)
      : control_(control), token_(token), reader_(max_payload) {}

  std::string_view next_input() override { return control_.next(); }
  void started(pid_t pid) override { pid_ = pid; }
  void input_written(std::size_t bytes) override { control_.written(bytes); }
  void received(const char* data, std::size_t size, double seconds) override {
    if (forged_) return;
    const std::size_t before = frames_.size();
    reader_.feed(data, size, seconds, frames_);
    if (reader_.broken()) return forge(fmt::format("the evidence stream is malformed: {}", *reader_.broken()));
    for (std::size_t i = before; i < frames_.size() && !forged_; ++i) {
      // The outside clock's CPU side, read as the mark arrives (the worker's other frames need none).
      if (frames_[i].kind == FrameKind::clock) frames_[i].cpu_seconds = process_tree_cpu_seconds(pid_);
      admit(frames_[i]);
    }
  }

  std::vector<Frame>& frames() { return frames_; }
  const std::optional<std::string>& forged() const { return forged_; }
  bool incomplete() const { return reader_.pending() > 0; }

 private:
  void forge(std::string why) {
    if (!forged_) forged_ = std::move(why);
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
  std::optional<double> noop_begin, timed_begin, noop_cpu_begin, timed_cpu_begin;
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
          break;
        }
        case FrameKind::outputs: {
          const auto draw = parse_draw(fields.at("draw").get<std::string>());
          if (!draw) return fmt::format("outputs of an unknown draw {}", fields.at("draw").dump());
          if (fields.contains("guard_violations"))
            report.guard_violations = fields.at("guard_violations").get<std::vector<GuardViolation>>();
          auto parts = split_outputs(frame.raw(), sizes);
          if (!parts) return fmt::format("outputs of {} bytes, not the outputs' {}", frame.raw().size(), sizes.size());
          if (*draw == Draw::timed) {
            const int64_t call = fields.at("call").get<int64_t>();
            if (!first_time(fmt::format("timed {}", call))) return fmt::format("the outputs of timed call {} twice", call);
            report.timed.push_back({call, std::move(*parts)});
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

WorkerOutcome run_worker(const WorkerLaunch& launch, WorkerRequest request, const DrawBytes& first,
                         const DrawBytes& second) {
  if (first.size() != request.inputs.size() || (request.second_draw && second.size() != request.inputs.size()))
    fail("run_worker: {} inputs, {} and {} draws' buffers", request.inputs.size(), first.size(), second.size());
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
  }

  // The largest frame: every output at once, plus room for the fields.
  uint64_t max_payload = uint64_t{1} << 24;
  for (const auto& output : request.outputs) max_payload += span_bytes(output);

  ControlStream control(request, first, second);
  Evidence evidence(control, token, max_payload);
  WorkerOutcome outcome;
  outcome.process = run_process(spec, &evidence);
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

}  // namespace d2k
