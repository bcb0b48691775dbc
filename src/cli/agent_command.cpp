// `d2k agent`: one agent run (src/agent) from the command line, or the resumption of one. Exit status:
// 0 when the run ended with a solution (or design) that passed its final evaluation, 1 when it ended
// without one, 2 for bad usage or a harness error.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <random>

#include "agent/run.hpp"
#include "cli/commands.hpp"
#include "cli/run_options.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "core/summary.hpp"
#include "core/task_loader.hpp"
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

// A resumed run evaluates as it was started: its recorded settings replace the run options.
void resume_options(const RunSettings& settings, RunOptions& run) {
  run.device = std::string(name_of(settings.device));
  run.workloads = settings.workloads;
  run.max_seconds = settings.timing_max_seconds;
  run.min_samples = settings.timing_min_samples;
  run.warmup = settings.timing_warmup;
  run.timeout = settings.worker_timeout_seconds;
  run.no_baseline = !settings.baseline;
}

// The settings of a new run, from the command line.
RunSettings new_settings(const AgentOptions& agent) {
  if (agent.task.empty() || agent.model.empty() || agent.models_file.empty())
    fail("d2k agent: --task, --model and --models are required (or --resume <run folder>)");
  auto condition = parse_condition(agent.condition);
  if (!condition) fail("--condition: unknown condition '{}' (none, L1, L1+L2, L1+L2+L3, design-only)", agent.condition);
  const auto& run = agent.run;
  RunSettings settings;
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
  return settings;
}

int run_agent(AgentOptions agent, const GlobalOptions& global) {
  RunSettings settings;
  fs::path run_dir;
  std::string root = global.root;
  const bool resuming = !agent.resume.empty();
  if (resuming) {
    run_dir = fs::absolute(agent.resume);
    settings = read_settings(run_dir);
    if (root.empty()) root = settings.root;
    resume_options(settings, agent.run);
    if (!agent.models_file.empty()) settings.models_file = fs::absolute(agent.models_file).string();
  } else {
    settings = new_settings(agent);
  }

  const auto models = llm::load_models(settings.models_file);
  const auto& model = find_model(models, settings.model, settings.models_file);
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

  auto client = llm::make_client(model);
  RunSetup setup;
  setup.settings = settings;
  setup.task = &task;
  setup.environment = environment;
  setup.eval = eval;
  setup.client = client.get();
  setup.cost_usd = [prices = model.prices](const llm::Usage& usage) { return llm::cost_usd(usage, prices); };
  setup.run_dir = run_dir;
  setup.log = &std::cerr;
  std::cerr << fmt::format("d2k agent: {} {} on {} with {} ({}), run folder {}\n", resuming ? "resuming" : "starting",
                           name_of(settings.condition), settings.task, settings.model, name_of(environment.device), run_dir.string());
  const auto result = resuming ? resume_run(setup) : start_run(setup);

  if (!result.traces.empty()) print_trace_table(std::cout, result.traces, summarize_run(result.traces));
  std::cout << fmt::format("run {}: {} ({}) after {} turns; final solution: {}; final evaluation {}\n", run_dir.string(),
                           name_of(result.status), result.reason, result.turns,
                           result.solution.empty() ? "none" : result.solution, result.passed ? "passed" : "not passed");
  std::cout << fmt::format("harness overhead per turn: mean {:.2f} ms, max {:.2f} ms\n", result.overhead_mean_ms,
                           result.overhead_max_ms);
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
  return {command, [options, &global] { return run_agent(*options, global); }};
}

}  // namespace d2k
