#include "cli/app.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fnmatch.h>

#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/agent_command.hpp"
#include "cli/context.hpp"
#include "cli/table.hpp"
#include "cli/tasks_check.hpp"
#include "eval/text_observer.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "core/repeat.hpp"
#include "core/overhead.hpp"
#include "runner/builder.hpp"

namespace d2k {
namespace {

// Returns the --seed option, so the caller can tell whether it was given.
CLI::Option* add_run_options(CLI::App& command, CommonOptions& options) {
  command.add_option("--device", options.device, "auto, cuda or cpu (auto: cuda when a GPU is usable)")
      ->capture_default_str();
  command.add_option("--workload,-w", options.workloads, "run only these workloads (repeatable)");
  auto* seed = command.add_option("--seed", options.seed, "seed of the input draw")->capture_default_str();
  command.add_option("--json", options.json, "write the traces as JSON to FILE ('-' for stdout)");
  command.add_flag("--no-baseline", options.no_baseline, "do not time the eager baseline");
  command.add_option("--timeout", options.timeout, "seconds a worker may run before it counts as hung")
      ->capture_default_str();
  command.add_option("--max-seconds", options.max_seconds, "timing budget per workload, seconds")
      ->capture_default_str();
  command.add_option("--min-samples", options.min_samples,
                     "timed calls at least per workload (default: 50 on cuda, 10 on cpu)");
  command.add_option("--warmup", options.warmup, "untimed calls before timing")->capture_default_str();
  command.add_option("--repeat", options.repeat,
                     "evaluate N times with seeds seed..seed+N-1 and report passes and the spread of medians")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  command.add_option("--rotate", options.rotate,
                     "timed calls cycle through input copies holding this many times the L2 (0: no rotation)")
      ->capture_default_str();
  command.add_flag("--refresh-ceilings", options.refresh_ceilings, "measure the device's ceilings again");
  command.add_option("--sandbox", options.sandbox,
                     "strict (isolation missing on this machine is an error), best-effort or off; docs/sandbox.md")
      ->capture_default_str();
  return seed;
}

// `doc` to FILE, or to stdout for "-".
void write_document(const std::string& target, const nlohmann::json& doc) {
  if (target == "-") {
    std::cout << doc.dump(2) << '\n';
    return;
  }
  std::ofstream out(target);
  out << doc.dump(2) << '\n';
  if (!out) fail("--json: could not write {}", target);
}

void write_json(const std::string& target, const EvalEnvironment& eval, const std::vector<Trace>& traces) {
  const auto rate = [](const std::optional<double>& r) { return r ? nlohmann::json(*r) : nlohmann::json(); };
  write_document(target, {{"device", name_of(eval.device)},
                          {"device_name", eval.device_name},
                          {"ceilings", {{"copy_gbps", eval.ceilings.copy_gbps},
                                        {"bf16_tflops", rate(eval.ceilings.bf16_tflops)},
                                        {"fp8_tflops", rate(eval.ceilings.fp8_tflops)},
                                        {"int8_tops", rate(eval.ceilings.int8_tops)}}},
                          {"overhead", overhead_of(traces)},
                          {"traces", traces}});
}

int finish(const CommonOptions& options, const EvalEnvironment& eval, const std::vector<Trace>& traces) {
  if (options.json != "-") print_trace_table(std::cout, traces);
  if (!options.json.empty()) write_json(options.json, eval, traces);
  const bool all_passed = std::all_of(traces.begin(), traces.end(), [](const Trace& t) { return t.status == Status::passed; });
  return all_passed && !traces.empty() ? 0 : 1;
}

// Runs `evaluate_once` options.repeat times with consecutive seeds; one run prints the trace table, more
// print the repeat table (and the JSON holds every run's traces).
int evaluate_runs(const CommonOptions& options, const EvalEnvironment& eval, Evaluator& evaluator,
                  const std::function<std::vector<Trace>()>& evaluate_once) {
  if (options.repeat == 1) return finish(options, eval, evaluate_once());
  std::vector<std::vector<Trace>> runs;
  for (int run = 0; run < options.repeat; ++run) {
    const uint64_t seed = evaluator.settings().seed + static_cast<uint64_t>(run);
    std::cerr << fmt::format("d2k: run {} of {} (seed {})\n", run + 1, options.repeat, seed);
    evaluator.set_seed(seed);
    runs.push_back(evaluate_once());
  }
  const auto rows = summarize_repeats(runs);
  if (options.json != "-") print_repeat_table(std::cout, rows);
  if (!options.json.empty()) {
    nlohmann::json doc = {{"device", name_of(eval.device)}, {"device_name", eval.device_name}, {"repeat", rows}};
    for (const auto& traces : runs) doc["runs"].push_back({{"traces", traces}});
    write_document(options.json, doc);
  }
  const bool all_passed = std::all_of(rows.begin(), rows.end(), [](const RepeatRow& r) { return r.passed == r.runs; });
  return all_passed && !rows.empty() ? 0 : 1;
}

// Once per command: the cpu device runs the smoke tier unless --workload names others.
void say_smoke_tier(const std::vector<const Task*>& tasks, const EvalSettings& settings) {
  if (auto note = smoke_tier_note(tasks, settings.workloads, settings.include_hidden, settings.tier))
    std::cerr << "d2k: " << *note << '\n';
}

std::set<int> parse_levels(const std::string& text) {
  std::set<int> levels;
  if (text.empty() || text == "none") return levels;
  if (text == "all") return {1, 2, 3};
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const auto item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::string digits = item.size() > 1 && (item[0] == 'L' || item[0] == 'l') ? item.substr(1) : item;
    if (digits != "1" && digits != "2" && digits != "3") fail("--levels: '{}' is not a level (1, 2, 3, L1.., all, none)", item);
    levels.insert(digits[0] - '0');
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return levels;
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"d2k: design-to-kernel benchmark. Is the kernel correct, and how fast is it against eager "
               "PyTorch, the expert and the GPU's speed of light?"};
  app.require_subcommand(1);
  CommonOptions options;
  app.add_option("--root", options.root, "the d2k tree holding tasks/ and include/ (default: $D2K_ROOT or the build's source)");

  std::string task_name, solution_path, levels = "all";
  std::vector<std::string> task_names;
  bool check_tasks = false;
  auto* tasks = app.add_subcommand("tasks", "list the tasks, show one with its guidance, or check them");
  tasks->add_option("task", task_names, "a task to show, e.g. norm/fused_add_rmsnorm (with --check: the tasks to check)");
  tasks->add_option("--levels", levels, "guidance levels to render: 1,2,3 | all | none")->capture_default_str();
  tasks->add_flag("--check", check_tasks, "validate the tasks (all when none is named): one line per problem, exit 1 on any");
  auto* new_task = app.add_subcommand("new-task", "scaffold tasks/<family>/<name>/ with every file to fill in");
  new_task->add_option("task", task_name, "the new task's <family>/<name>")->required();

  auto* eval = app.add_subcommand("eval", "evaluate one solution on a task's workloads");
  eval->add_option("task", task_name, "the task, e.g. norm/fused_add_rmsnorm")->required();
  eval->add_option("solution", solution_path, "a .cu or .cpp file, or a folder of them")->required();
  auto* eval_seed = add_run_options(*eval, options);
  eval->add_flag("--final", options.final, "final evaluation: published and hidden workloads, a fresh seed unless --seed");
  // For the agent's profile tool: ncu inside the worker's sandbox (docs/agent.md, profile).
  eval->add_option("--ncu-report", options.ncu_report, "run each worker under Nsight Compute, its report to FILE")->group("");
  eval->add_option("--ncu-metrics", options.ncu_metrics, "the metrics ncu collects (comma-separated)")->group("");
  eval->add_option("--ncu-launch-count", options.ncu_launch_count, "kernels ncu profiles")->group("");

  std::vector<std::string> task_globs;
  auto* bench = app.add_subcommand("bench", "evaluate the shipped expert solutions on every task");
  bench->add_option("--task,-t", task_globs, "task name or glob, e.g. 'moe/*' (repeatable; default all)");
  auto* bench_seed = add_run_options(*bench, options);

  auto* ceilings = app.add_subcommand("ceilings", "measure (or show the cached) copy bandwidth and dense bf16/fp8/int8 matrix rates");
  ceilings->add_option("--device", options.device, "auto, cuda or cpu")->capture_default_str();
  ceilings->add_flag("--refresh", options.refresh_ceilings, "measure again");

  AgentOptions agent_options;
  auto* agent = app.add_subcommand("agent", "run an LLM agent on a task under a guidance condition, or resume a run");
  agent->add_option("--task,-t", agent_options.task, "the task, e.g. moe/topk_softmax");
  agent->add_option("--model,-m", agent_options.model, "a model of the models file");
  agent->add_option("--models", agent_options.models_file, "the models file (TOML; see docs/agent.md)");
  agent->add_option("--condition,-c", agent_options.condition, "none | L1 | L1+L2 | L1+L2+L3 | design-only")->capture_default_str();
  agent->add_option("--turns", agent_options.turns, "turn budget: model responses at most")->capture_default_str();
  int64_t max_tokens_total = 0;
  double max_cost_usd = 0, max_wall_seconds = 0;
  auto* max_tokens_option = agent->add_option("--max-tokens-total", max_tokens_total, "token budget: input + output tokens");
  auto* max_cost_option = agent->add_option("--max-cost-usd", max_cost_usd, "cost budget in US dollars");
  auto* max_wall_option = agent->add_option("--max-wall-seconds", max_wall_seconds, "wall-clock budget in seconds");
  agent->add_option("--runs-dir", agent_options.runs_dir, "where run folders go (default: <cache>/runs)");
  agent->add_option("--resume", agent_options.resume, "continue the run in this folder (after a kill, say)");
  agent->add_option("--device", options.device, "auto, cuda or cpu")->capture_default_str();
  agent->add_option("--workload,-w", options.workloads, "use only these published workloads (repeatable)");
  auto* agent_seed = agent->add_option("--seed", options.seed, "the run's seed (default: random)");
  agent->add_flag("--no-baseline", options.no_baseline, "benchmark without timing the eager baseline");
  agent->add_option("--timeout", options.timeout, "seconds a worker may run")->capture_default_str();
  agent->add_option("--max-seconds", options.max_seconds, "timing budget per workload, seconds")->capture_default_str();
  agent->add_option("--min-samples", options.min_samples, "timed calls at least per workload (default: 50 on cuda, 10 on cpu)");
  agent->add_option("--warmup", options.warmup, "untimed calls before timing")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  options.seed_given = eval_seed->count() > 0 || bench_seed->count() > 0 || agent_seed->count() > 0;
  options.include_hidden = bench->parsed();  // the experts run on every workload
  try {
    if (agent->parsed()) {
      if (max_tokens_option->count()) agent_options.max_tokens_total = max_tokens_total;
      if (max_cost_option->count()) agent_options.max_cost_usd = max_cost_usd;
      if (max_wall_option->count()) agent_options.max_wall_seconds = max_wall_seconds;
      return run_agent_command(agent_options, options);
    }
    const auto context = make_context(options);
    if (new_task->parsed()) return run_new_task(context, task_name, std::cout);
    if (tasks->parsed()) {
      if (check_tasks) return run_tasks_check(context, task_names, std::cout);
      if (task_names.size() > 1) fail("d2k tasks shows one task at a time (several only with --check)");
      const auto all = load_all_tasks(context);
      if (task_names.empty()) print_task_list(std::cout, all);
      else print_task(std::cout, find_task(all, task_names[0]), parse_levels(levels));
      return 0;
    }
    if (ceilings->parsed()) {
      const auto environment = make_environment(context, options);
      std::cout << fmt::format("{} ({}): copy {:.0f} GB/s (read + write)", environment.device_name,
                               name_of(environment.device), environment.ceilings.copy_gbps);
      const auto& c = environment.ceilings;
      if (c.bf16_tflops) std::cout << fmt::format(", dense bf16 {:.0f} TFLOP/s", *c.bf16_tflops);
      if (c.fp8_tflops) std::cout << fmt::format(", dense fp8 (e4m3) {:.0f} TFLOP/s", *c.fp8_tflops);
      if (c.int8_tops) std::cout << fmt::format(", dense int8 {:.0f} TOPS", *c.int8_tops);
      std::cout << '\n';
      return 0;
    }
    if (eval->parsed()) {
      const auto all = load_all_tasks(context);
      const auto& task = find_task(all, task_name);
      const auto solution = load_solution(solution_path);
      const auto environment = make_environment(context, options);
      TextObserver observer(std::cerr);
      Evaluator evaluator(environment, make_settings(options, environment.device), &observer);
      say_smoke_tier({&task}, evaluator.settings());
      return evaluate_runs(options, environment, evaluator, [&] { return evaluator.evaluate(task, solution); });
    }
    if (bench->parsed()) {
      const auto all = load_all_tasks(context);
      const auto environment = make_environment(context, options);
      TextObserver observer(std::cerr);
      Evaluator evaluator(environment, make_settings(options, environment.device), &observer);
      std::vector<std::pair<const Task*, Solution>> selected;
      for (const auto& task : all) {
        const bool match = task_globs.empty() || std::any_of(task_globs.begin(), task_globs.end(), [&](const std::string& g) {
                             return fnmatch(g.c_str(), task.name.c_str(), 0) == 0;
                           });
        if (!match) continue;
        const auto dir = task.dir / "solution" / std::string(name_of(environment.device));
        if (!std::filesystem::exists(dir)) fail("{}: no expert solution for the {} device at {}", task.name, name_of(environment.device), dir.string());
        selected.emplace_back(&task, load_solution(dir));
      }
      if (selected.empty()) fail("--task: no task matches");
      std::vector<const Task*> selected_tasks;
      for (const auto& [task, solution] : selected) selected_tasks.push_back(task);
      say_smoke_tier(selected_tasks, evaluator.settings());
      return evaluate_runs(options, environment, evaluator, [&] {
        std::vector<Trace> traces;
        for (const auto& [task, solution] : selected) {
          auto task_traces = evaluator.evaluate(*task, solution);
          traces.insert(traces.end(), task_traces.begin(), task_traces.end());
        }
        return traces;
      });
    }
  } catch (const std::exception& e) {
    std::cerr << "d2k: error: " << e.what() << '\n';
    return 2;
  }
  return 2;
}

}  // namespace d2k
