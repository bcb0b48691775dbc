// `d2k agent`: one agent run (src/agent) from the command line, or the resumption of one. Exit status:
// 0 when the run ended with a solution (or design) that passed its final evaluation, 1 when it ended
// without one, 2 for bad usage or a harness error.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <random>

#include "agent/resume_check.hpp"
#include "agent/run.hpp"
#include "cli/commands.hpp"
#include "cli/run_options.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "core/summary.hpp"
#include "core/task_loader.hpp"
#include "core/text.hpp"
#include "core/timestamp.hpp"
#include "llm/model_config.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;
using namespace d2k::agent;

struct AgentOptions {
  std::string task;
  std::string model;
  std::string models_file;
  std::string condition = "none";
  std::string language;  // cuda | triton; empty: triton on the cuda device, cuda on the cpu device
  int turns = 350;
  std::optional<int64_t> max_tokens_total;
  std::optional<double> max_cost_usd;
  std::optional<double> max_wall_seconds;
  std::string runs_dir;  // default: <cache>/runs
  std::string resume;    // a run folder to continue
  RunOptions run;
};

std::string timestamp() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y%m%dT%H%M%SZ", &tm);
  return buffer;
}

std::string folder_name(std::string text) {
  for (char& c : text)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' && c != '+') c = '_';
  return text;
}

const llm::ModelConfig& find_model(const std::map<std::string, llm::ModelConfig>& models, const std::string& name,
                                   const std::string& file) {
  if (auto it = models.find(name); it != models.end()) return it->second;
  std::string known;
  for (const auto& [key, config] : models) known += (known.empty() ? "" : ", ") + key;
  fail("--model: {} has no model '{}' (it has: {})", file, name, known);
}

// The options given with --resume, as the run.json values they would set (agent/resume_check.hpp
// refuses those that change the experiment). Read before resume_options replaces the run options.
std::vector<GivenOption> given_options(const CLI::App& command, const AgentOptions& agent) {
  std::vector<GivenOption> given;
  const auto add = [&](const char* option, const char* field, const auto& value) {
    if (command.count(option) > 0) given.push_back({option, field, nlohmann::json(value)});
  };
  add("--task", "/task", agent.task);
  add("--model", "/model", agent.model);
  if (command.count("--condition") > 0) {
    const auto condition = parse_condition(agent.condition);
    if (!condition) fail("--condition: unknown condition '{}' (none, L1, L1+L2, L1+L2+L3, design-only)", agent.condition);
    given.push_back({"--condition", "/condition", std::string(name_of(*condition))});
  }
  if (command.count("--language") > 0) {
    if (!parse_run_language(agent.language)) fail("--language: unknown language '{}' (cuda, triton)", agent.language);
    given.push_back({"--language", "/language", agent.language});
  }
  add("--turns", "/budget/max_turns", agent.turns);
  add("--max-tokens-total", "/budget/max_tokens_total", agent.max_tokens_total.value_or(0));
  add("--max-cost-usd", "/budget/max_cost_usd", agent.max_cost_usd.value_or(0));
  add("--max-wall-seconds", "/budget/max_wall_seconds", agent.max_wall_seconds.value_or(0));
  add("--seed", "/seed", agent.run.seed);
  if (command.count("--device") > 0)  // auto: the device it chooses on this machine
    given.push_back({"--device", "/device", std::string(name_of(resolve_device({.device = agent.run.device})))});
  add("--workload", "/workloads", agent.run.workloads);
  add("--max-seconds", "/timing/max_seconds", agent.run.max_seconds);
  add("--min-samples", "/timing/min_samples", agent.run.min_samples);
  add("--warmup", "/timing/warmup", agent.run.warmup);
  add("--timeout", "/worker_timeout_seconds", agent.run.timeout);
  add("--no-baseline", "/baseline", !agent.run.no_baseline);
  add("--sandbox", "/sandbox", agent.run.sandbox);
  return given;
}

// A resumed run evaluates as it was started: its recorded settings replace the run options.
void resume_options(const RunSettings& settings, RunOptions& run) {
  run.device = std::string(name_of(settings.device));
  run.workloads = settings.workloads;
  run.max_seconds = settings.timing_max_seconds;
  run.min_samples = settings.timing_min_samples;
  run.warmup = settings.timing_warmup;
  run.timeout = settings.worker_timeout_seconds;
  run.no_baseline = !settings.baseline;
  if (!settings.sandbox.empty()) run.sandbox = settings.sandbox;
}

// The settings of a new run, from the command line.
RunSettings new_settings(const AgentOptions& agent) {
  if (agent.task.empty() || agent.model.empty() || agent.models_file.empty())
    fail("d2k agent: --task, --model and --models are required (or --resume <run folder>)");
  auto condition = parse_condition(agent.condition);
  if (!condition) fail("--condition: unknown condition '{}' (none, L1, L1+L2, L1+L2+L3, design-only)", agent.condition);
  const auto& run = agent.run;
  RunSettings settings;
  // The language: given, else the device's default (D2K-Bench's agents write Triton on the GPU; the cpu
  // device has no Triton backend, so host C++ there).
  const Device device = resolve_device({.device = run.device});
  if (agent.language.empty()) {
    settings.language = default_run_language(device);
  } else {
    auto language = parse_run_language(agent.language);
    if (!language) fail("--language: unknown language '{}' (cuda, triton)", agent.language);
    settings.language = *language;
  }
  if (auto why = language_refusal(settings.language, device)) fail("{}", *why);
  settings.task = agent.task;
  settings.model = agent.model;
  settings.models_file = fs::absolute(agent.models_file).string();
  settings.condition = *condition;
  settings.budget.max_turns = agent.turns;
  settings.budget.max_tokens_total = agent.max_tokens_total;
  settings.budget.max_cost_usd = agent.max_cost_usd;
  settings.budget.max_wall_seconds = agent.max_wall_seconds;
  if (auto why = invalid(settings.budget)) fail("{}", *why);
  if (run.seed_given) {
    settings.seed = run.seed;
  } else {
    std::random_device random;
    settings.seed = (static_cast<uint64_t>(random()) << 32) | random();
  }
  settings.workloads = run.workloads;
  settings.timing_max_seconds = run.max_seconds;
  settings.timing_min_samples = run.min_samples;
  settings.timing_warmup = run.warmup;
  settings.worker_timeout_seconds = run.timeout;
  settings.baseline = !run.no_baseline;
  settings.sandbox = run.sandbox;
  return settings;
}

// The settings of the run in run_dir with the options given to its resume applied. A run that has
// ended is reported as it is: an option that would change its experiment is still refused, the others
// are not recorded (nothing runs).
RunSettings resumed_settings(const fs::path& run_dir, bool ended, const CLI::App& command, AgentOptions& agent) {
  auto settings = read_settings(run_dir);
  auto changed = settings;
  apply_resume_options(changed, given_options(command, agent), utc_timestamp());
  if (auto why = invalid(changed.budget)) fail("{}", *why);
  if (!ended) {
    for (auto c = changed.changes.begin() + static_cast<std::ptrdiff_t>(settings.changes.size()); c != changed.changes.end(); ++c)
      std::cerr << fmt::format("d2k agent: {} changes {} to {} (recorded in run.json)\n", c->option, c->from.dump(), c->to.dump());
    settings = changed;
  }
  resume_options(settings, agent.run);
  return settings;
}

// The model's client, with a line on stderr before each retry's wait. For a resume, the models file
// (--models, else the recorded one) must give the model the entry and prices the run started with.
std::unique_ptr<llm::ChatClient> model_client(RunSettings& settings, const AgentOptions& agent, bool resuming,
                                              llm::Prices& prices) {
  const auto file = agent.models_file.empty() ? settings.models_file : fs::absolute(agent.models_file).string();
  const auto models = llm::load_models(file);
  const auto& model = find_model(models, settings.model, file);
  if (resuming) check_model_entry(settings, model, file, utc_timestamp());
  else settings.model_entry = model_entry(model);
  prices = model.prices;
  llm::ClientOptions options;
  options.on_retry = [](const llm::RetryNotice& n) {
    std::cerr << fmt::format("d2k agent: the model's endpoint: attempt {} of {} failed ({}); retrying in {:.1f} s\n",
                             n.attempt, n.max_attempts, printable(n.why, 300), n.wait_seconds);
  };
  return llm::make_client(model, options);
}

void print_summary(const fs::path& run_dir, const RunResult& result) {
  if (!result.traces.empty()) print_trace_table(std::cout, result.traces, summarize_run(result.traces));
  // The reason may quote an endpoint's error body: printed escaped, it cannot forge console lines.
  std::cout << fmt::format("run {}: {} ({}) after {} turns; final solution: {}; final evaluation {}\n", run_dir.string(),
                           name_of(result.status), printable(result.reason, 1000), result.turns,
                           result.solution.empty() ? "none" : result.solution, result.passed ? "passed" : "not passed");
  const auto& u = result.used;
  std::cout << fmt::format("tokens: {} input ({} cached), {} output; cost ${:.4f}; {:.0f} s\n", u.input_tokens,
                           u.cached_input_tokens, u.output_tokens, u.cost_usd, u.wall_seconds);
  std::cout << fmt::format("harness overhead per turn: mean {:.2f} ms, max {:.2f} ms\n", result.overhead_mean_ms,
                           result.overhead_max_ms);
}

int run_agent(AgentOptions agent, const GlobalOptions& global, const CLI::App& command) {
  RunSettings settings;
  fs::path run_dir;
  std::string root = global.root;
  const bool resuming = !agent.resume.empty();
  bool ended = false;  // a resumed run that has ended: reported, its model never asked
  if (resuming) {
    run_dir = fs::absolute(agent.resume);
    ended = run_has_ended(run_dir);
    settings = resumed_settings(run_dir, ended, command, agent);
    if (root.empty()) root = settings.root;
  } else {
    settings = new_settings(agent);
  }

  std::unique_ptr<llm::ChatClient> client;
  llm::Prices prices;
  if (!ended) client = model_client(settings, agent, resuming, prices);
  const auto context = make_context(root);
  const Task task = load_task(context.tasks_dir, settings.task);
  const auto environment = make_environment(environment_options(agent.run, context));
  const auto eval = eval_settings(agent.run, environment.device);
  select_workloads(task, settings.workloads, false);  // an unknown or hidden name fails here, before the run
  if (!resuming) {
    settings.device = environment.device;
    settings.device_name = environment.device_name;
    settings.root = context.root.string();
    const fs::path runs = agent.runs_dir.empty() ? context.cache_dir / "runs" : fs::path(agent.runs_dir);
    std::random_device random;
    run_dir = fs::absolute(runs / fmt::format("{}-{}-{}-{}-{:04x}", folder_name(settings.task), folder_name(agent.condition),
                                              folder_name(settings.model), timestamp(), random() & 0xffff));
  }

  RunSetup setup;
  setup.settings = settings;
  setup.task = &task;
  setup.environment = environment;
  setup.eval = eval;
  setup.client = client.get();
  setup.cost_usd = [prices](const llm::Usage& usage) { return llm::cost_usd(usage, prices); };
  setup.run_dir = run_dir;
  setup.log = &std::cerr;
  std::cerr << fmt::format("d2k agent: {} {} on {} with {} ({}, {}), run folder {}\n",
                           ended ? "reporting" : resuming ? "resuming" : "starting", name_of(settings.condition),
                           settings.task, settings.model, name_of(environment.device), name_of(settings.language),
                           run_dir.string());
  const auto result = resuming ? resume_run(setup) : start_run(setup);
  print_summary(run_dir, result);
  if (result.status == RunStatus::harness_error) return 2;
  return result.passed ? 0 : 1;
}

}  // namespace

Command add_agent_command(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<AgentOptions>();
  auto* command = app.add_subcommand("agent", "run an LLM agent on a task under a guidance condition, or resume a run");
  command->add_option("--task,-t", options->task, "the task, e.g. moe/topk_softmax");
  command->add_option("--model,-m", options->model, "a model of the models file");
  command->add_option("--models", options->models_file, "the models file (TOML; see docs/agent.md)");
  command->add_option("--condition,-c", options->condition, "none | L1 | L1+L2 | L1+L2+L3 | design-only")->capture_default_str();
  command->add_option("--language,-l", options->language,
                      "cuda | triton: what the model writes (default: triton on the cuda device, cuda on the cpu "
                      "device, where cuda means host C++; the cpu device has no Triton backend)");
  command->add_option("--turns", options->turns, "turn budget: model responses at most")->capture_default_str();
  command->add_option_function<int64_t>("--max-tokens-total", [options](int64_t n) { options->max_tokens_total = n; },
                                        "token budget: input + output tokens");
  command->add_option_function<double>("--max-cost-usd", [options](double usd) { options->max_cost_usd = usd; },
                                       "cost budget in US dollars");
  command->add_option_function<double>("--max-wall-seconds", [options](double s) { options->max_wall_seconds = s; },
                                       "wall-clock budget in seconds");
  command->add_option("--runs-dir", options->runs_dir, "where run folders go (default: <cache>/runs)");
  command->add_option("--resume", options->resume, "continue the run in this folder (after a kill, say)");
  add_run_options(*command, options->run, RunOptionsFor::agent);
  return {command, [options, &global, command] { return run_agent(*options, global, *command); }};
}

}  // namespace d2k
