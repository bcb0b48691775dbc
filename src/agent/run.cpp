#include "agent/run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "agent/prompt.hpp"
#include "core/timestamp.hpp"
#include "agent/records.hpp"
#include "agent/result_file.hpp"
#include "agent/run_lock.hpp"
#include "runner/builder.hpp"
#include "agent/tools.hpp"
#include "agent/transcript.hpp"
#include "agent/undo_log.hpp"
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
// A tool result is flushed to disk when its tool worked longer than this: losing it would cost that work
// again, which dwarfs a flush (about 1.5 ms on a shared disk). Cheaper results wait for the turn's budget
// record, so that a turn of 50 file calls does not pay 50 flushes.
constexpr double kFlushToolSeconds = 0.1;
constexpr std::size_t kPrintedNameBytes = 40;  // of a tool name on the console (tool names are short; a model's need not be)

struct Pending {
  llm::ToolCall call;
  int index = -1;
  bool recorded = false;
  bool done = false;
  bool ran = false;  // done, and the tool ran: not a call after submit, answered "not run"
};

// Moves a vector back where it was lent from when the scope ends.
struct MovedBack {
  std::vector<llm::Message>& home;
  std::vector<llm::Message>& lent;
  ~MovedBack() { home = std::move(lent); }
};

class Loop {
 public:
  explicit Loop(const RunSetup& setup)
      : setup_(setup),
        settings_(setup.settings),
        writer_(setup.run_dir / "transcript.jsonl"),
        toolbox_(ToolEnv{setup.task, setup.settings.condition, setup.run_dir, &setup.environment, &setup.eval, setup.settings.seed,
                         setup.settings.language}),
        undo_(setup.run_dir / "undo") {}

  void fresh() {
    PromptInputs inputs;
    inputs.task = setup_.task;
    inputs.workloads = select_workloads(*setup_.task, settings_.workloads, false);
    inputs.condition = settings_.condition;
    inputs.language = settings_.language;
    inputs.device = setup_.environment.device;
    inputs.device_name = setup_.environment.device_name;
    inputs.ceiling = setup_.environment.ceilings;
    inputs.budget = settings_.budget;
    inputs.tools = tool_specs(settings_.condition, settings_.language);
    inputs.root = setup_.environment.root;
    inputs.cutlass_include_dir = cutlass_include_dir(setup_.environment.root);
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
    // A run that has ended runs no tool again, whatever calls its last turn left without a result.
    const bool ended = phase_ == Phase::ending || phase_ == Phase::done;
    std::vector<int> rerun;
    for (const auto& p : pending_)
      if (p.recorded && !p.done && !ended) rerun.push_back(p.index);
    if (phase_ != Phase::done) writer_.append(record::resume(used_.turns, file.torn, rerun));
    if (setup_.log) log_resume(file, rerun);
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
    result_.used = used_;
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
        const auto started = Clock::now();
        llm::ChatResponse response;
        try {
          response = ask();
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
        undo_.clear();  // the budget record's flush took the turn's results to disk
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

  // One model response. The conversation moves into the request and back, however complete() ends:
  // a copy of it would cost time every turn.
  llm::ChatResponse ask() {
    llm::ChatRequest request{system_, std::move(messages_), tools_};
    const MovedBack moved_back{messages_, request.messages};
    return setup_.client->complete(request);
  }

  void begin_turn(const llm::Message& message) {
    messages_.push_back(message);
    assistant_at_ = messages_.size() - 1;
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
    prepare_undo();
    for (auto& p : pending_) {
      if (p.done) continue;
      if (!p.recorded) {
        // Not flushed: a call whose record a machine crash loses gets the same index again (indices
        // follow the records) and runs again after the undo log has put its files back.
        p.index = calls_++;
        writer_.append(record::tool_call(used_.turns, p.index, p.call), false);
        p.recorded = true;
      } else {
        measured_ = false;  // a resumed call
      }
      ToolOutcome outcome;
      if (turn_submitted_) {
        outcome.result = {{"error", "not run: submit ended the run"}};
        outcome.is_error = true;
      } else {
        outcome = toolbox_.run(p.call.name, p.call.arguments, p.index);
      }
      tool_seconds_ += outcome.seconds;
      crash_point("tool");
      const auto content = cap_text(dump_json(outcome.result), kResultBytes);
      writer_.append(record::tool_result(used_.turns, p.index, p.call, outcome, content), outcome.seconds > kFlushToolSeconds);
      take_result(p, outcome, content);
    }
  }

  // Before a turn's calls run. A fresh turn saves the files its writes and edits name (one flush); a
  // resumed turn whose save exists puts them back and applies the writes and edits that already have a
  // result again, so that the calls without one see the workspace they first saw.
  void prepare_undo() {
    if (undo_.restore(used_.turns)) {
      measured_ = false;
      for (const auto& p : pending_)
        if (p.done && p.ran && toolbox_.mutated_file(p.call.name, p.call.arguments))
          toolbox_.run(p.call.name, p.call.arguments, p.index);
      return;
    }
    std::vector<fs::path> files;
    for (const auto& p : pending_)
      if (auto file = toolbox_.mutated_file(p.call.name, p.call.arguments)) files.push_back(*file);
    undo_.save(used_.turns, files);
  }

  void take_result(Pending& p, const ToolOutcome& outcome, const std::string& content) {
    if (outcome.is_error && p.call.arguments.size() > kStoredArgumentsBytes) {
      // The conversation keeps a short stand-in for the refused arguments (valid JSON, so either wire
      // format carries it): the model has the refusal, and the request does not carry them every turn.
      auto& sent = messages_.at(assistant_at_).tool_calls.at(static_cast<std::size_t>(&p - pending_.data()));
      sent.arguments = json{{"omitted", fmt::format("{} bytes of arguments, refused (see the tool result); not sent "
                                                     "again", p.call.arguments.size())}}.dump();
    }
    llm::Message message{llm::Role::tool, content, {}, p.call.id, outcome.is_error};
    messages_.push_back(std::move(message));
    if (!outcome.format_error) turn_good_call_ = true;
    p.done = true;
    p.ran = !turn_submitted_;
    if (std::all_of(pending_.begin(), pending_.end(), [](const Pending& q) { return q.done; }))
      streak_ = turn_good_call_ ? 0 : streak_ + 1;
    if (outcome.candidate) candidates_.push_back(*outcome.candidate);
    if (outcome.submitted) submitted_ = turn_submitted_ = true;
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
    write_file_atomically(setup_.run_dir / "result.json",
                          result_document(final_record, settings_, traces, passed).dump(2) + "\n");
    undo_.clear();
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

  void log_resume(const TranscriptFile& file, const std::vector<int>& rerun) const {
    const auto torn = file.torn.empty() ? "" : fmt::format("; a torn last line of {} bytes was cut off", file.torn.size());
    if (phase_ == Phase::done) {
      *setup_.log << fmt::format("d2k agent: {} ended after turn {} ({}); reporting it\n", setup_.run_dir.string(),
                                 used_.turns, name_of(result_.status));
    } else if (phase_ == Phase::ending) {
      *setup_.log << fmt::format("d2k agent: {} ended after turn {} ({}) before its final evaluation; running it{}\n",
                                 setup_.run_dir.string(), used_.turns, name_of(status_), torn);
    } else {
      *setup_.log << fmt::format("d2k agent: resuming {} after turn {}{}{}\n", setup_.run_dir.string(), used_.turns, torn,
                                 rerun.empty() ? "" : fmt::format("; {} tool call(s) without a result run again", rerun.size()));
    }
  }

  void log_turn() {
    std::string calls;
    // A tool's name is the model's text: printed escaped and cut, it cannot forge a console line.
    for (const auto& p : pending_) calls += (calls.empty() ? "" : ", ") + printable(p.call.name, kPrintedNameBytes);
    *setup_.log << fmt::format("[turn {}] {} | {} tokens, ${:.4f}, {:.0f} s\n", used_.turns, calls.empty() ? "(no tool call)" : calls,
                               used_.input_tokens + used_.output_tokens, used_.cost_usd, used_.wall_seconds);
  }

  const RunSetup& setup_;
  const RunSettings& settings_;
  TranscriptWriter writer_;
  ToolBox toolbox_;
  UndoLog undo_;
  Phase phase_ = Phase::fresh;
  std::string system_;
  std::vector<llm::ToolSpec> tools_;
  std::vector<llm::Message> messages_;
  std::vector<Pending> pending_;
  std::size_t assistant_at_ = 0;  // the current turn's assistant message in messages_
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


// A run that has ended needs no model client: it is reported, or its final evaluation runs.
void check_setup(const RunSetup& setup, bool needs_model) {
  if (!setup.task) fail("agent run: no task");
  if (needs_model && !setup.client) fail("agent run: {}: the run goes on and needs a model client", setup.run_dir.string());
  if (setup.task->name != setup.settings.task) fail("agent run: task {} given for a run of {}", setup.task->name, setup.settings.task);
  if (needs_model)
    if (auto why = language_refusal(setup.settings.language, setup.environment.device)) fail("agent run: {}", *why);
}

bool has_ended(const TranscriptFile& transcript) {
  return std::any_of(transcript.records.begin(), transcript.records.end(),
                     [](const json& r) { return r.value("type", "") == "end"; });
}

}  // namespace

bool run_has_ended(const fs::path& run_dir) {
  const auto file = run_dir / "transcript.jsonl";
  return fs::exists(file) && has_ended(read_transcript(file));
}

RunSettings read_settings(const fs::path& run_dir) {
  const auto text = read_whole_file(run_dir / "run.json");
  if (!text) fail("{}: not a run folder (no run.json)", run_dir.string());
  const auto parsed = json::parse(*text, nullptr, false);
  if (parsed.is_discarded()) fail("{}: not JSON", (run_dir / "run.json").string());
  return parsed.get<RunSettings>();
}

RunResult start_run(const RunSetup& setup) {
  check_setup(setup, true);
  fs::create_directories(setup.run_dir / "workspace");
  const RunLock lock(setup.run_dir);
  if (fs::exists(setup.run_dir / "transcript.jsonl")) fail("{} already holds a run; use --resume", setup.run_dir.string());
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
  check_setup(setup, false);
  if (!fs::is_directory(setup.run_dir)) fail("{}: not a run folder", setup.run_dir.string());
  const RunLock lock(setup.run_dir);
  const auto file = setup.run_dir / "transcript.jsonl";
  auto transcript = read_transcript(file);
  check_setup(setup, !has_ended(transcript));
  // The changes this resume allowed (agent/resume_check.hpp) go into run.json before anything runs.
  if (setup.settings.changes.size() > read_settings(setup.run_dir).changes.size())
    write_file_atomically(setup.run_dir / "run.json", json(setup.settings).dump(2) + "\n");
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
