#include "campaign/runner.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <list>
#include <mutex>
#include <thread>

#include "agent/resume_check.hpp"
#include "agent/run.hpp"
#include "campaign/device_locks.hpp"
#include "campaign/ingest.hpp"
#include "campaign/schedule.hpp"
#include "core/error.hpp"
#include "core/summary.hpp"
#include "core/text.hpp"
#include "core/timestamp.hpp"
#include "eval/workloads.hpp"
#include "runner/builder.hpp"

namespace d2k::campaign {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string expert_key(const std::string& task) { return "expert/" + task; }

std::string duration(double seconds) {
  const auto s = static_cast<long>(seconds);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

class Driver {
 public:
  explicit Driver(CampaignSetup& setup)
      : s_(setup), store_(setup.paths.store()), locks_(setup.locks_dir) {
    locks_.journal_to(s_.paths.holds());
    s_.environment.hold_device = locks_.for_device(0);
  }

  CampaignOutcome run() {
    init();
    experts();
    agent_runs();
    if (s_.plan.rerun) reruns();
    CampaignOutcome outcome;
    for (const auto& r : store_.runs()) {
      ++outcome.runs;
      outcome.finished += r.state == RunState::finished;
      outcome.failed += r.state == RunState::failed;
      outcome.passed += r.state == RunState::finished && r.passed;
    }
    say("campaign {}: {} runs, {} finished ({} passed), {} failed; store {}\n", s_.plan.name, outcome.runs,
        outcome.finished, outcome.passed, outcome.failed, store_.file());
    return outcome;
  }

 private:
  template <typename... Args>
  void say(fmt::format_string<Args...> format, Args&&... args) {
    if (!s_.out) return;
    std::lock_guard lock(out_mutex_);
    *s_.out << fmt::format(format, std::forward<Args>(args)...) << std::flush;
  }

  void init() {
    CampaignInfo info;
    info.name = s_.plan.name;
    info.created = utc_timestamp();
    info.plan_file = s_.plan.file.string();
    info.plan_toml = s_.plan.text;
    info.plan_json = plan_json(s_.plan).dump();
    info.root = s_.root;
    info.device = std::string(name_of(s_.environment.device));
    info.device_name = s_.environment.device_name;
    info.language = std::string(name_of(campaign_language(s_.plan, s_.environment.device)));
    store_.set_shard(s_.paths.shard);
    store_.init(info, shard_runs(s_.plan.runs(), s_.paths.shard));
    const auto stored = store_.campaign();
    if (stored && stored->device != info.device)
      fail("{}: the campaign ran on the {} device; this machine gives {} (campaign.device)", store_.file(), stored->device,
           info.device);
    // The language the campaign's runs were started in stays: a campaign whose store predates schema 4 (no
    // campaign.language then) ran in cuda, and its remaining runs must be paired with those.
    if (stored && stored->language != info.language) {
      if (s_.plan.language)
        fail("{}: the campaign ran in the {} language; {} says campaign.language = \"{}\"", store_.file(),
             stored->language, s_.plan.file.string(), info.language);
      info.language = stored->language;
    }
    const auto language = agent::parse_run_language(info.language);
    if (!language) fail("{}: the campaign's language '{}' is not cuda or triton", store_.file(), info.language);
    language_ = *language;
    store_.set_device(info.device, info.device_name);
  }

  // The settings of a run's evaluations: the plan's timing, its task's workloads and their tier.
  EvalSettings eval_for(const std::string& task) const {
    EvalSettings eval = s_.eval;
    const auto it = s_.plan.workloads.find(task);
    eval.workloads = it == s_.plan.workloads.end() ? std::vector<std::string>{} : it->second;
    eval.tier = default_tier(s_.environment.device, eval.workloads);
    return eval;
  }

  // As the run's final evaluation runs: every published and hidden workload of its tier, timed.
  EvalSettings final_settings(const std::string& task, uint64_t seed) const {
    auto eval = eval_for(task);
    eval.workloads.clear();
    eval.include_hidden = true;
    eval.time = true;
    eval.seed = seed;
    return eval;
  }

  void experts() {
    for (const auto& name : shard_experts(s_.plan.tasks, s_.paths.shard)) {
      if (store_.has_evaluation(expert_key(name), EvaluationKind::expert)) continue;
      const auto& task = s_.tasks.at(name);
      const auto dir = task.dir / "solution" / std::string(name_of(s_.environment.device));
      const uint64_t seed = paired_seed(s_.plan.seed, "expert:" + name, 0);
      say("campaign {}: evaluating the expert of {} ({})\n", s_.plan.name, name, dir.string());
      const auto traces = Evaluator(s_.environment, final_settings(name, seed)).evaluate(task, load_solution(dir));
      const bool passed = summarize_run(traces).all_passed();
      if (!passed) say("campaign {}: warning: the expert of {} did not pass; its task scores are suspect\n", s_.plan.name, name);
      store_.put_evaluation(evaluation_of(expert_key(name), name, EvaluationKind::expert, dir.string(), seed,
                                          std::string(name_of(s_.environment.device)), traces, passed, utc_timestamp()));
    }
  }

  struct Active {
    std::string key;
    std::thread thread;
    std::atomic<bool> done{false};
    std::unique_ptr<TranscriptTail> tail;
  };

  void agent_runs() {
    Schedule schedule(s_.plan.concurrent_runs, s_.plan.per_endpoint);
    std::map<std::string, RunRow> rows;
    int already = 0;
    for (const auto& r : store_.runs()) {
      if (r.state == RunState::finished) {
        ++already;
        continue;
      }
      rows[r.plan.key] = r;
      schedule.add(r.plan.key, s_.models.at(r.plan.model).base_url);
    }
    const int total = static_cast<int>(rows.size()) + already;
    say("campaign {}: {} runs, {} finished before, {} to run ({} at once, {} per endpoint)\n", s_.plan.name, total, already,
        rows.size(), s_.plan.concurrent_runs, s_.plan.per_endpoint);
    std::list<Active> active;
    int done = 0, failed = 0;
    const auto started = Clock::now();
    auto last_line = started;
    while (schedule.waiting() > 0 || !active.empty()) {
      while (auto key = schedule.next()) {
        auto& a = active.emplace_back();
        a.key = *key;
        a.tail = std::make_unique<TranscriptTail>(s_.paths.run_dir(*key) / "transcript.jsonl");
        const RunRow row = rows.at(*key);
        a.thread = std::thread([this, row, &a] {
          drive(row);
          a.done = true;
          wake_.notify_all();
        });
      }
      {
        std::unique_lock lock(wake_mutex_);
        wake_.wait_for(lock, std::chrono::milliseconds(500));
      }
      for (auto it = active.begin(); it != active.end();) {
        store_.record_turns(it->key, it->tail->read_new());
        if (!it->done) {
          ++it;
          continue;
        }
        it->thread.join();
        schedule.done(it->key);
        const auto row = store_.run(it->key);
        ++done;
        if (row && row->state == RunState::failed) {
          ++failed;
          say("[{}/{}] {}: failed: {}\n", done + already, total, it->key, printable(row->error, 400));
        } else if (row) {
          say("[{}/{}] {}: {}, final evaluation {}, {} turns, ${:.4f}\n", done + already, total, it->key, row->status,
              row->passed ? "passed" : "not passed", row->turns, row->cost_usd);
        }
        it = active.erase(it);
      }
      if (std::chrono::duration<double>(Clock::now() - last_line).count() >= s_.progress_seconds) {
        last_line = Clock::now();
        progress_line(total, already + done, static_cast<int>(active.size()), failed, started, done);
      }
    }
    progress_line(total, already + done, 0, failed, started, done);
  }

  void progress_line(int total, int finished, int running, int failed, Clock::time_point started, int done_here) {
    const auto usage = store_.usage_totals();
    const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
    const int left = total - finished;
    const std::string eta = done_here > 0 && left > 0 ? duration(elapsed / done_here * left) : left > 0 ? "unknown" : "0s";
    say("campaign {}: {}/{} done, {} running, {} failed | {} input tokens, {} output | ${:.4f} | {} elapsed, ETA {}\n",
        s_.plan.name, finished, total, running, failed, usage.input_tokens, usage.output_tokens, usage.cost_usd,
        duration(elapsed), eta);
  }

  // One run, started or resumed from its transcript, then recorded. Failures of d2k itself (an
  // exception out of the agent loop) mark it failed; the next `d2k campaign run` tries it again.
  void drive(const RunRow& row) {
    const auto& p = row.plan;
    const auto run_dir = s_.paths.run_dir(p.key);
    try {
      store_.mark_running(p.key, run_dir.string(), utc_timestamp());
      fs::create_directories(s_.paths.logs());
      std::ofstream log(s_.paths.log(p.key), std::ios::app);
      const auto& model = s_.models.at(p.model);
      const bool resuming = fs::exists(run_dir / "transcript.jsonl");
      agent::RunSettings settings;
      if (resuming) {
        settings = agent::read_settings(run_dir);
        if (settings.language != language_)
          fail("{}: the run is in the {} language (run.json), the campaign in {}", run_dir.string(),
               name_of(settings.language), name_of(language_));
        if (!agent::run_has_ended(run_dir))
          agent::check_model_entry(settings, model, s_.plan.models_file.string(), utc_timestamp());
      } else {
        settings = planned_run_settings(s_.plan, p, language_, s_.environment, s_.root, model);
      }
      llm::ClientOptions options;
      options.on_retry = [&log](const llm::RetryNotice& n) {
        log << fmt::format("d2k campaign: the model's endpoint: attempt {} of {} failed ({}); retrying in {:.1f} s\n",
                           n.attempt, n.max_attempts, printable(n.why, 300), n.wait_seconds) << std::flush;
      };
      const auto client = llm::make_client(model, options);
      const auto prices = model.prices;
      agent::RunSetup setup;
      setup.settings = settings;
      setup.task = &s_.tasks.at(p.task);
      setup.environment = s_.environment;
      setup.eval = eval_for(p.task);
      setup.client = client.get();
      setup.cost_usd = [prices](const llm::Usage& usage) { return llm::cost_usd(usage, prices); };
      setup.run_dir = run_dir;
      setup.log = &log;
      log << fmt::format("d2k campaign: {} {} ({}), run folder {}\n", resuming ? "resuming" : "starting", p.key,
                         utc_timestamp(), run_dir.string()) << std::flush;
      const auto result = resuming ? agent::resume_run(setup) : agent::start_run(setup);
      const auto now = utc_timestamp();
      store_.finish_run(finished_row(row, result, now),
                        final_evaluation(p, result, std::string(name_of(s_.environment.device)), now),
                        transcript_usage(run_dir / "transcript.jsonl"));
    } catch (const std::exception& e) {
      try {
        store_.fail_run(p.key, e.what(), utc_timestamp());
      } catch (...) {
      }
    }
  }

  // Each passing run's solution once more, one at a time, after every run: the published table's times
  // come from a device that nothing else uses.
  void reruns() {
    for (const auto& r : store_.runs()) {
      if (r.state != RunState::finished || !r.passed || r.solution.empty()) continue;
      if (r.plan.condition == agent::Condition::design_only) continue;
      if (store_.has_evaluation(r.plan.key, EvaluationKind::rerun)) continue;
      const uint64_t seed = paired_seed(r.plan.seed, "rerun", 0);
      const auto dir = fs::path(r.run_dir) / r.solution;
      say("campaign {}: re-running {} ({})\n", s_.plan.name, r.plan.key, dir.string());
      const auto traces = Evaluator(s_.environment, final_settings(r.plan.task, seed)).evaluate(s_.tasks.at(r.plan.task), load_solution(dir));
      store_.put_evaluation(evaluation_of(r.plan.key, r.plan.task, EvaluationKind::rerun, r.solution, seed,
                                          std::string(name_of(s_.environment.device)), traces,
                                          summarize_run(traces).all_passed(), utc_timestamp()));
    }
  }

  CampaignSetup& s_;
  Language language_ = Language::cuda;  // the campaign's (init)
  Store store_;
  DeviceLocks locks_;
  std::mutex out_mutex_;
  std::mutex wake_mutex_;
  std::condition_variable wake_;
};

}  // namespace

agent::RunSettings planned_run_settings(const Plan& plan, const PlannedRun& p, Language language,
                                       const EvalEnvironment& environment, const std::string& root,
                                       const llm::ModelConfig& model) {
  agent::RunSettings settings;
  settings.task = p.task;
  settings.model = p.model;
  settings.models_file = plan.models_file.string();
  settings.condition = p.condition;
  settings.language = language;
  settings.budget = plan.budget;
  settings.seed = p.seed;
  if (auto it = plan.workloads.find(p.task); it != plan.workloads.end()) settings.workloads = it->second;
  settings.timing_max_seconds = plan.timing.max_seconds;
  settings.timing_min_samples = plan.timing.min_samples;
  settings.timing_warmup = plan.timing.warmup;
  settings.worker_timeout_seconds = plan.timing.worker_timeout_seconds;
  settings.baseline = plan.timing.baseline;
  settings.sandbox = plan.sandbox;
  settings.device = environment.device;
  settings.device_name = environment.device_name;
  settings.root = root;
  settings.model_entry = agent::model_entry(model);
  return settings;
}

fs::path CampaignPaths::run_dir(const std::string& key) const { return runs() / folder_of(key); }
fs::path CampaignPaths::log(const std::string& key) const { return logs() / (folder_of(key) + ".log"); }

CampaignLock::CampaignLock(const fs::path& file) {
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("{}: cannot open: {}", file.string(), std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const auto pid = holder(file);
    ::close(fd_);
    fail("{}: the campaign is being run by process {} (it holds {}); wait for it to end or stop it first",
         file.parent_path().string(), pid ? std::to_string(*pid) : "?", file.string());
  }
  const auto text = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    fail("{}: cannot write the pid: {}", file.string(), std::strerror(errno));
}

CampaignLock::~CampaignLock() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<long> CampaignLock::holder(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<long> pid;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    char buffer[32] = {};
    const auto n = ::pread(fd, buffer, sizeof buffer - 1, 0);
    pid = n > 0 ? std::strtol(buffer, nullptr, 10) : 0L;
  }
  ::close(fd);
  return pid;
}

CampaignOutcome run_campaign(CampaignSetup& setup) {
  fs::create_directories(setup.paths.runs());
  fs::create_directories(setup.paths.logs());
  const CampaignLock lock(setup.paths.lock());
  Driver driver(setup);
  return driver.run();
}

}  // namespace d2k::campaign
