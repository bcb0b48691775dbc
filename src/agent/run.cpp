#include "agent/run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "agent/prompt.hpp"
#include "core/timestamp.hpp"
#include "agent/records.hpp"
#include "agent/tools.hpp"
#include "agent/transcript.hpp"
#include "agent/workspace.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "core/summary.hpp"
#include "eval/text_observer.hpp"

namespace d2k::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

constexpr const char* kNudge =
    "Your response called no tool. Work through the tools (see the system prompt); call submit when you are done.";
constexpr uint64_t kFinalSalt = 0x66696e616cull;  // "final": the final evaluation's seed, apart from every tool call's

struct Pending {
  llm::ToolCall call;
  int index = -1;
  bool recorded = false;
  bool done = false;
};

class Loop {
 public:
  explicit Loop(const RunSetup& setup)
      : setup_(setup),
        settings_(setup.settings),
        writer_(setup.run_dir / "transcript.jsonl"),
        toolbox_(ToolEnv{setup.task, setup.settings.condition, setup.run_dir, &setup.environment, &setup.eval, setup.settings.seed}) {}

  void fresh() {
    PromptInputs inputs;
    inputs.task = setup_.task;
    inputs.workloads = select_workloads(*setup_.task, settings_.workloads, false);
    inputs.condition = settings_.condition;
    inputs.device = setup_.environment.device;
    inputs.device_name = setup_.environment.device_name;
    inputs.ceiling = setup_.environment.ceilings;
    inputs.budget = settings_.budget;
    inputs.tools = tool_specs(settings_.condition);
    inputs.root = setup_.environment.root;
    const auto prompt = build_prompt(inputs);
    system_ = prompt.system;
    tools_ = inputs.tools;
    writer_.append(record::prompt(prompt.system, prompt.user, tools_));
    messages_.push_back(llm::Message{llm::Role::user, prompt.user, {}, "", false});
    phase_ = Phase::ready;
  }

  void replay(const TranscriptFile& file) {
    int recorded_in_turn = 0, results_in_turn = 0;
    for (const auto& r : file.records) {
      const auto type = r.at("type").get<std::string>();
      if (type == "prompt") {
        system_ = r.at("system").get<std::string>();
        tools_ = r.at("tools").get<std::vector<llm::ToolSpec>>();
        messages_ = {llm::Message{llm::Role::user, r.at("user").get<std::string>(), {}, "", false}};
        phase_ = Phase::ready;
      } else if (type == "request") {
        const auto expected = r.at("messages").get<std::size_t>();
        if (expected != messages_.size())
          fail("transcript seq {}: the request had {} messages, the transcript rebuilds {}", r.at("seq").get<int>(),
               expected, messages_.size());
        phase_ = Phase::awaiting;
      } else if (type == "response") {
        charge(used_, record::usage(r), r.at("cost_usd").get<double>());
        used_.turns = r.at("turn").get<int>();
        if (record::format_error(r).empty()) begin_turn(record::assistant_message(r));
        else unreadable_turn();
        recorded_in_turn = results_in_turn = 0;
      } else if (type == "tool_call") {
        auto& p = pending_.at(recorded_in_turn++);
        p.index = r.at("index").get<int>();
        p.recorded = true;
        calls_ = std::max(calls_, p.index + 1);
      } else if (type == "tool_result") {
        auto& p = pending_.at(results_in_turn++);
        ToolOutcome outcome;
        outcome.is_error = r.at("is_error").get<bool>();
        outcome.format_error = r.value("format_error", false);
        outcome.submitted = r.value("submitted", false);
        if (r.contains("candidate")) outcome.candidate = r.at("candidate").get<Candidate>();
        take_result(p, outcome, r.at("content").get<std::string>());
      } else if (type == "user") {
        messages_.push_back(llm::Message{llm::Role::user, r.at("text").get<std::string>(), {}, "", false});
        nudged_ = true;
      } else if (type == "budget") {
        used_.wall_seconds = r.at("used").at("wall_seconds").get<double>();
        if (r.contains("overhead_ms")) overheads_.push_back(r.at("overhead_ms").get<double>());
        phase_ = Phase::ready;
      } else if (type == "end") {
        status_ = *parse_run_status(r.at("status").get<std::string>());
        reason_ = r.at("reason").get<std::string>();
        phase_ = Phase::ending;
      } else if (type == "final") {
        result_.status = *parse_run_status(r.at("status").get<std::string>());
        result_.reason = r.at("reason").get<std::string>();
        result_.solution = r.at("solution").is_null() ? "" : r.at("solution").get<std::string>();
        result_.passed = r.at("passed").get<bool>();
        result_.traces = r.at("traces").get<std::vector<Trace>>();
        phase_ = Phase::done;
      }
    }
    wall_base_ = used_.wall_seconds;
    if (phase_ == Phase::fresh) fail("{}: the transcript has no prompt record", (setup_.run_dir / "transcript.jsonl").string());
    std::vector<int> rerun;
    for (const auto& p : pending_)
      if (p.recorded && !p.done) rerun.push_back(p.index);
    if (phase_ != Phase::done) writer_.append(record::resume(used_.turns, file.torn, rerun));
    if (setup_.log)
      *setup_.log << fmt::format("d2k agent: resuming {} after turn {}{}{}\n", setup_.run_dir.string(), used_.turns,
                                 file.torn.empty() ? "" : fmt::format("; a torn last line of {} bytes was cut off", file.torn.size()),
                                 rerun.empty() ? "" : fmt::format("; {} tool call(s) without a result run again", rerun.size()));
  }

  void set_next_seq(int seq) { writer_.set_next_seq(seq); }
  void note_resume(const std::string& torn) { writer_.append(record::resume(0, torn, {})); }

  RunResult drive() {
    while (phase_ != Phase::done) {
      try {
        step();
      } catch (const std::exception& e) {
        if (phase_ == Phase::ending) {
          result_.status = RunStatus::harness_error;
          result_.reason = fmt::format("final evaluation: {}", e.what());
          phase_ = Phase::done;
          writer_.append(record::final(result_.status, result_.reason, "", false, {}, used_, overhead_summary()));
        } else {
          end(RunStatus::harness_error, e.what());
        }
      }
    }
    result_.turns = used_.turns;
    const auto summary = overhead_summary();
    result_.overhead_mean_ms = summary.value("mean_ms", 0.0);
    result_.overhead_max_ms = summary.value("max_ms", 0.0);
    return result_;
  }

 private:
  enum class Phase { fresh, ready, awaiting, tools, turn_end, ending, done };

  void step() {
    switch (phase_) {
      case Phase::fresh: fail("the run has no prompt");
      case Phase::ready: {
        if (!turn_started_) turn_started_ = Clock::now();
        update_wall();
        if (streak_ >= settings_.max_format_errors) {
          end(RunStatus::format_errors, fmt::format("{} format errors in a row", streak_));
          return;
        }
        if (auto why = exhausted(settings_.budget, used_)) {
          end(RunStatus::budget, *why);
          return;
        }
        // Not flushed: a request lost in a machine crash is only sent again; the response's flush
        // takes this line along.
        writer_.append(record::request(used_.turns + 1, messages_.size()), false);
        crash_point("request");
        phase_ = Phase::awaiting;
        return;
      }
      case Phase::awaiting: {
        llm::ChatRequest request{system_, messages_, tools_};
        const auto started = Clock::now();
        llm::ChatResponse response;
        try {
          response = setup_.client->complete(request);
        } catch (const llm::ChatError& e) {
          model_seconds_ += seconds_since(started);
          const json error = {{"kind", llm::to_string(e.kind())}, {"http_status", e.http_status()},
                              {"attempts", e.attempts()}, {"body", cap_text(e.body(), 4096)}};
          end(e.kind() == llm::ChatError::Kind::context_length ? RunStatus::context_overflow : RunStatus::api_error,
              fmt::format("{} error{}: {}", llm::to_string(e.kind()),
                          e.http_status() ? fmt::format(" (HTTP {})", e.http_status()) : "", e.what()),
              error);
          return;
        }
        model_seconds_ += seconds_since(started);
        const double cost = setup_.cost_usd ? setup_.cost_usd(response.usage) : 0.0;
        charge(used_, response.usage, cost);
        writer_.append(record::response(used_.turns, response, cost));
        crash_point("response");
        if (response.usage.estimated && used_.estimated_responses == 1 && setup_.log)
          *setup_.log << fmt::format("d2k agent: warning: turn {}: the endpoint sent no usable token counts; they are "
                                     "estimated from bytes (usage.estimated in the transcript)\n", used_.turns);
        if (!response.format_error.empty()) {
          if (setup_.log) *setup_.log << fmt::format("d2k agent: turn {}: format error: {}\n", used_.turns, response.format_error);
          unreadable_turn();
          return;
        }
        response.message.role = llm::Role::assistant;
        begin_turn(response.message);
        return;
      }
      case Phase::tools:
        run_tools();
        phase_ = Phase::turn_end;
        return;
      case Phase::turn_end: {
        if (pending_.empty() && !nudged_) {
          writer_.append(record::user(used_.turns, kNudge));
          messages_.push_back(llm::Message{llm::Role::user, kNudge, {}, "", false});
          nudged_ = true;
        }
        update_wall();
        std::optional<record::Overhead> overhead;
        const auto mark = Clock::now();
        if (turn_started_ && measured_) {
          overhead = record::Overhead{
              1000.0 * (std::chrono::duration<double>(mark - *turn_started_).count() - model_seconds_ - tool_seconds_),
              model_seconds_, tool_seconds_};
          overheads_.push_back(overhead->overhead_ms);
        }
        writer_.append(record::budget(used_.turns, used_, streak_, overhead));
        // The next turn's overhead starts here, so that this record's own write is counted too.
        turn_started_ = mark;
        measured_ = true;
        model_seconds_ = tool_seconds_ = 0;
        if (setup_.log) log_turn();
        crash_point("turn");
        if (submitted_) end(RunStatus::submitted, "the model submitted");
        else phase_ = Phase::ready;
        return;
      }
      case Phase::ending:
        finish();
        return;
      case Phase::done: return;
    }
  }

  void begin_turn(const llm::Message& message) {
    messages_.push_back(message);
    messages_.back().role = llm::Role::assistant;
    pending_.clear();
    for (const auto& call : message.tool_calls) pending_.push_back(Pending{call});
    // A reply is a format error when it calls no tool or every call it makes is one: the limit counts
    // replies, so that the model sees its errors before the run ends.
    if (pending_.empty()) ++streak_;
    turn_good_call_ = false;
    nudged_ = false;
    turn_submitted_ = false;
    phase_ = Phase::tools;
  }

  // A reply the endpoint garbled (llm::ChatResponse::format_error) counts as a format error but leaves
  // the conversation as it was: the model never saw it, so the same request goes again next turn.
  void unreadable_turn() {
    pending_.clear();
    ++streak_;
    nudged_ = true;  // no reminder: the model did nothing it could be told about
    phase_ = Phase::turn_end;
  }

  void run_tools() {
    for (auto& p : pending_) {
      if (p.done) continue;
      if (!p.recorded) {
        p.index = calls_++;
        // Flushed only before a tool that changes a file: the undo log of resume depends on it.
        writer_.append(record::tool_call(used_.turns, p.index, p.call),
                       toolbox_.mutated_file(p.call.name, p.call.arguments).has_value());
        p.recorded = true;
      } else {
        restore(p.index);  // a resumed call: undo what its first run may have changed
        measured_ = false;
      }
      ToolOutcome outcome;
      if (turn_submitted_) {
        outcome.result = {{"error", "not run: submit ended the run"}};
        outcome.is_error = true;
      } else {
        save(p);
        outcome = toolbox_.run(p.call.name, p.call.arguments, p.index);
      }
      tool_seconds_ += outcome.seconds;
      crash_point("tool");
      const auto content = cap_text(dump_json(outcome.result), kResultBytes);
      writer_.append(record::tool_result(used_.turns, p.index, p.call, outcome, content));
      forget(p.index);
      take_result(p, outcome, content);
    }
  }

  void take_result(Pending& p, const ToolOutcome& outcome, const std::string& content) {
    llm::Message message{llm::Role::tool, content, {}, p.call.id, outcome.is_error};
    messages_.push_back(std::move(message));
    if (!outcome.format_error) turn_good_call_ = true;
    p.done = true;
    if (std::all_of(pending_.begin(), pending_.end(), [](const Pending& q) { return q.done; }))
      streak_ = turn_good_call_ ? 0 : streak_ + 1;
    if (outcome.candidate) candidates_.push_back(*outcome.candidate);
    if (outcome.submitted) submitted_ = turn_submitted_ = true;
  }

  // The undo log of write_file and edit_file: the file as it was, saved before the call runs and
  // dropped once its result is recorded. A kill in between leaves it for restore().
  fs::path undo_dir() const { return setup_.run_dir / "undo"; }

  void save(const Pending& p) {
    const auto file = toolbox_.mutated_file(p.call.name, p.call.arguments);
    if (!file) return;
    // A folder, FIFO or device at the path: the tool refuses it and changes nothing, so there is
    // nothing to undo, and reading it as a file would fail (a folder) or block (a FIFO).
    std::error_code error;
    const auto status = fs::status(*file, error);
    if (fs::exists(status) && !fs::is_regular_file(status)) return;
    fs::create_directories(undo_dir());
    const auto before = read_whole_file(*file);
    if (before) write_file_atomically(undo_dir() / fmt::format("{}.content", p.index), *before);
    json meta = {{"path", file->string()}, {"existed", before.has_value()}};
    write_file_atomically(undo_dir() / fmt::format("{}.json", p.index), dump_json(meta));
  }

  void restore(int index) {
    const auto meta_file = undo_dir() / fmt::format("{}.json", index);
    const auto text = read_whole_file(meta_file);
    if (!text) return;  // killed before anything was changed
    const auto meta = json::parse(*text);
    const fs::path file = meta.at("path").get<std::string>();
    if (meta.at("existed").get<bool>()) {
      const auto before = read_whole_file(undo_dir() / fmt::format("{}.content", index));
      if (!before) fail("the undo log of tool call {} lacks the file's content", index);
      write_file_atomically(file, *before);
    } else {
      std::error_code ignored;
      fs::remove(file, ignored);
    }
  }

  void forget(int index) {
    std::error_code ignored;
    fs::remove(undo_dir() / fmt::format("{}.json", index), ignored);
    fs::remove(undo_dir() / fmt::format("{}.content", index), ignored);
  }

  void end(RunStatus status, const std::string& reason, const json& error = nullptr) {
    status_ = status;
    reason_ = reason;
    writer_.append(record::end(status, reason, error));
    crash_point("end");
    phase_ = Phase::ending;
  }

  std::optional<Candidate> best_candidate() const {
    std::optional<Candidate> best;
    for (const auto& c : candidates_)
      if (c.time_geomean_ms && (!best || *c.time_geomean_ms < *best->time_geomean_ms)) best = c;
    if (!best && !candidates_.empty()) best = candidates_.back();
    return best;
  }

  void finish() {
    std::string solution;
    std::vector<Trace> traces;
    bool passed = false;
    const auto workspace = setup_.run_dir / "workspace";
    const auto submitted_dir = setup_.run_dir / "submitted";
    if (status_ != RunStatus::harness_error) {
      if (settings_.condition == Condition::design_only) {
        if (status_ == RunStatus::submitted) {
          fs::remove_all(submitted_dir);
          fs::create_directories(submitted_dir);
          fs::copy_file(workspace / "design.md", submitted_dir / "design.md");
          solution = "submitted/design.md";
          passed = true;
        }
      } else {
        if (status_ == RunStatus::submitted) {
          const auto submitted = load_solution(workspace);
          fs::remove_all(submitted_dir);
          fs::create_directories(submitted_dir);
          for (const auto& f : submitted.sources) fs::copy_file(f, submitted_dir / f.filename());
          for (const auto& f : submitted.headers) fs::copy_file(f, submitted_dir / f.filename());
          solution = "submitted";
        } else if (auto best = best_candidate()) {
          solution = best->dir;
        }
        if (!solution.empty()) {
          EvalSettings options = setup_.eval;
          options.workloads.clear();
          options.include_hidden = true;
          options.time = true;
          options.seed = derive_seed(settings_.seed, kFinalSalt);
          if (setup_.log) *setup_.log << fmt::format("d2k agent: final evaluation of {} (published and hidden workloads)\n", solution);
          std::optional<TextObserver> observer;
          if (setup_.log) observer.emplace(*setup_.log);
          traces = Evaluator(setup_.environment, options, observer ? &*observer : nullptr)
                       .evaluate(*setup_.task, load_solution(setup_.run_dir / solution));
          passed = summarize_run(traces).all_passed();
        }
      }
    }
    result_.status = status_;
    result_.reason = reason_;
    result_.solution = solution;
    result_.passed = passed;
    result_.traces = traces;
    const auto final_record = record::final(status_, reason_, solution, passed, traces, used_, overhead_summary());
    writer_.append(final_record);
    write_file_atomically(setup_.run_dir / "result.json", final_record.dump(2) + "\n");
    phase_ = Phase::done;
  }

  json overhead_summary() const {
    if (overheads_.empty()) return json::object();
    auto sorted = overheads_;
    std::sort(sorted.begin(), sorted.end());
    double sum = 0;
    for (double v : sorted) sum += v;
    return {{"turns_measured", sorted.size()},
            {"mean_ms", sum / static_cast<double>(sorted.size())},
            {"median_ms", sorted[sorted.size() / 2]},
            {"max_ms", sorted.back()}};
  }

  void update_wall() { used_.wall_seconds = wall_base_ + seconds_since(process_started_); }

  void log_turn() {
    std::string calls;
    for (const auto& p : pending_) calls += (calls.empty() ? "" : ", ") + p.call.name;
    *setup_.log << fmt::format("[turn {}] {} | {} tokens, ${:.4f}, {:.0f} s\n", used_.turns, calls.empty() ? "(no tool call)" : calls,
                               used_.input_tokens + used_.output_tokens, used_.cost_usd, used_.wall_seconds);
  }

  const RunSetup& setup_;
  const RunSettings& settings_;
  TranscriptWriter writer_;
  ToolBox toolbox_;
  Phase phase_ = Phase::fresh;
  std::string system_;
  std::vector<llm::ToolSpec> tools_;
  std::vector<llm::Message> messages_;
  std::vector<Pending> pending_;
  Used used_;
  int calls_ = 0;
  int streak_ = 0;             // replies in a row that were format errors
  bool turn_good_call_ = false;  // this reply made a call that was not a format error
  bool nudged_ = false;
  bool submitted_ = false;
  bool turn_submitted_ = false;
  std::vector<Candidate> candidates_;
  RunStatus status_ = RunStatus::harness_error;
  std::string reason_;
  RunResult result_;
  // Overhead accounting of the current turn.
  std::optional<Clock::time_point> turn_started_;
  bool measured_ = true;  // false for a turn that was resumed part-way
  double model_seconds_ = 0;
  double tool_seconds_ = 0;
  std::vector<double> overheads_;
  Clock::time_point process_started_ = Clock::now();
  double wall_base_ = 0;
};


void check_setup(const RunSetup& setup) {
  if (!setup.task || !setup.client) fail("agent run: no task or no model client");
  if (setup.task->name != setup.settings.task) fail("agent run: task {} given for a run of {}", setup.task->name, setup.settings.task);
}

}  // namespace

RunSettings read_settings(const fs::path& run_dir) {
  const auto text = read_whole_file(run_dir / "run.json");
  if (!text) fail("{}: not a run folder (no run.json)", run_dir.string());
  const auto parsed = json::parse(*text, nullptr, false);
  if (parsed.is_discarded()) fail("{}: not JSON", (run_dir / "run.json").string());
  return parsed.get<RunSettings>();
}

RunResult start_run(const RunSetup& setup) {
  check_setup(setup);
  if (fs::exists(setup.run_dir / "transcript.jsonl")) fail("{} already holds a run; use --resume", setup.run_dir.string());
  fs::create_directories(setup.run_dir / "workspace");
  auto settings = setup.settings;
  if (settings.created.empty()) settings.created = utc_timestamp();
  write_file_atomically(setup.run_dir / "run.json", json(settings).dump(2) + "\n");
  const auto published = select_workloads(*setup.task, setup.settings.workloads, false);
  write_file_atomically(setup.run_dir / "workspace" / "TASK.md", task_sheet(*setup.task, published));
  Loop loop(setup);
  loop.fresh();
  return loop.drive();
}

RunResult resume_run(const RunSetup& setup) {
  check_setup(setup);
  const auto file = setup.run_dir / "transcript.jsonl";
  auto transcript = read_transcript(file);
  if (!transcript.torn.empty()) fs::resize_file(file, transcript.complete_bytes);
  Loop loop(setup);
  loop.set_next_seq(static_cast<int>(transcript.records.size()));
  if (transcript.records.empty()) {  // killed while writing the first record
    loop.fresh();
    loop.note_resume(transcript.torn);
  } else {
    loop.replay(transcript);
  }
  return loop.drive();
}

}  // namespace d2k::agent
