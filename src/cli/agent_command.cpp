#include "cli/agent_command.hpp"

#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <random>

#include "agent/run.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "llm/model_config.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;
using namespace d2k::agent;

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

}  // namespace

int run_agent_command(const AgentOptions& agent, CommonOptions options) {
  RunSettings settings;
  fs::path run_dir;
  const bool resuming = !agent.resume.empty();
  if (resuming) {
    run_dir = fs::absolute(agent.resume);
    settings = read_settings(run_dir);
    if (options.root.empty()) options.root = settings.root;
    options.device = std::string(name_of(settings.device));
    options.workloads = settings.workloads;
    options.max_seconds = settings.timing_max_seconds;
    options.min_samples = settings.timing_min_samples;
    options.warmup = settings.timing_warmup;
    options.timeout = settings.worker_timeout_seconds;
    options.no_baseline = !settings.baseline;
    if (!agent.models_file.empty()) settings.models_file = fs::absolute(agent.models_file).string();
  } else {
    if (agent.task.empty() || agent.model.empty() || agent.models_file.empty())
      fail("d2k agent: --task, --model and --models are required (or --resume <run folder>)");
    auto condition = parse_condition(agent.condition);
    if (!condition) fail("--condition: unknown condition '{}' (none, L1, L1+L2, L1+L2+L3, design-only)", agent.condition);
    if (agent.turns < 1) fail("--turns: must be at least 1, not {}", agent.turns);
    settings.task = agent.task;
    settings.model = agent.model;
    settings.models_file = fs::absolute(agent.models_file).string();
    settings.condition = *condition;
    settings.budget.max_turns = agent.turns;
    settings.budget.max_tokens_total = agent.max_tokens_total;
    settings.budget.max_cost_usd = agent.max_cost_usd;
    settings.budget.max_wall_seconds = agent.max_wall_seconds;
    if (options.seed_given) {
      settings.seed = options.seed;
    } else {
      std::random_device random;
      settings.seed = (static_cast<uint64_t>(random()) << 32) | random();
    }
    settings.workloads = options.workloads;
    settings.timing_max_seconds = options.max_seconds;
    settings.timing_min_samples = options.min_samples;
    settings.timing_warmup = options.warmup;
    settings.worker_timeout_seconds = options.timeout;
    settings.baseline = !options.no_baseline;
  }

  const auto models = llm::load_models(settings.models_file);
  const auto& model = find_model(models, settings.model, settings.models_file);
  const auto context = make_context(options);
  const auto tasks = load_all_tasks(context);
  const auto& task = find_task(tasks, settings.task);
  const auto environment = make_environment(context, options);
  const auto eval = make_settings(options, environment.device);
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
  std::error_code ignored;
  setup.d2k_executable = fs::read_symlink("/proc/self/exe", ignored);
  setup.log = &std::cerr;
  std::cerr << fmt::format("d2k agent: {} {} on {} with {} ({}), run folder {}\n", resuming ? "resuming" : "starting",
                           name_of(settings.condition), settings.task, settings.model, name_of(environment.device), run_dir.string());
  const auto result = resuming ? resume_run(setup) : start_run(setup);

  if (!result.traces.empty()) print_trace_table(std::cout, result.traces);
  std::cout << fmt::format("run {}: {} ({}) after {} turns; final solution: {}; final evaluation {}\n", run_dir.string(),
                           name_of(result.status), result.reason, result.turns,
                           result.solution.empty() ? "none" : result.solution, result.passed ? "passed" : "not passed");
  std::cout << fmt::format("harness overhead per turn: mean {:.2f} ms, max {:.2f} ms\n", result.overhead_mean_ms,
                           result.overhead_max_ms);
  if (result.status == RunStatus::harness_error) return 2;
  return result.passed ? 0 : 1;
}

}  // namespace d2k
