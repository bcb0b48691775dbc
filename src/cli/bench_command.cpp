// `d2k bench`: the shipped expert solutions of the device on every task (or those --task selects),
// published and hidden workloads.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/commands.hpp"
#include "cli/results.hpp"
#include "cli/run_options.hpp"
#include "core/error.hpp"
#include "core/task_loader.hpp"

namespace d2k {
namespace {

struct BenchOptions {
  std::vector<std::string> task_globs;
  bool build_only = false;
  RunOptions run;
};

// The tasks the globs match (all without globs).
std::vector<Task> matching_tasks(const std::filesystem::path& tasks_dir, const std::vector<std::string>& globs) {
  auto tasks = load_tasks(tasks_dir);
  std::erase_if(tasks, [&](const Task& task) {
    return !globs.empty() && std::none_of(globs.begin(), globs.end(), [&](const std::string& g) {
      return fnmatch(g.c_str(), task.name.c_str(), 0) == 0;
    });
  });
  if (tasks.empty()) fail("--task: no task matches");
  return tasks;
}

// Each task's expert solution for `device`: tasks/<family>/<name>/solution/<device>/.
std::vector<Solution> expert_solutions(const std::vector<Task>& tasks, Device device) {
  std::vector<Solution> solutions;
  for (const auto& task : tasks) {
    const auto dir = task.dir / "solution" / std::string(name_of(device));
    if (!std::filesystem::exists(dir)) fail("{}: no expert solution for the {} device at {}", task.name, name_of(device), dir.string());
    solutions.push_back(load_solution(dir));
  }
  return solutions;
}

// --build-only: each expert built (or found) in the cache, a line each on stdout; 1 when any build failed.
int build_experts(const RunOptions& run, const Context& context, const std::vector<Task>& tasks) {
  const auto environment = make_build_environment(environment_options(run, context));
  const auto solutions = expert_solutions(tasks, environment.device);
  const double timeout = eval_settings(run, environment.device).build_timeout_seconds;
  int failed = 0;
  double seconds = 0;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const auto build = build_solution(solutions[i], solution_build_options(environment, solutions[i], timeout));
    seconds += build.seconds;
    if (build.ok) {
      fmt::print("{} ({}): {} in {:.1f} s, cache entry {}\n", tasks[i].name, name_of(environment.device),
                 build.cached ? "in the cache" : "built", build.seconds, build.hash);
    } else {
      ++failed;
      fmt::print("{} ({}): FAILED{} in {:.1f} s: {}\n{}\n", tasks[i].name, name_of(environment.device),
                 build.timed_out ? " (timed out)" : "", build.seconds, build.command, build.log);
    }
    std::fflush(stdout);
  }
  fmt::print("{} of {} expert builds ok in {:.1f} s; cache {}\n", tasks.size() - failed, tasks.size(), seconds,
             environment.build_cache.string());
  return failed == 0 ? 0 : 1;
}

}  // namespace

Command add_bench_command(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<BenchOptions>();
  auto* command = app.add_subcommand("bench", "evaluate the shipped expert solutions on every task");
  command->add_option("--task,-t", options->task_globs, "task name or glob, e.g. 'moe/*' (repeatable; default all)");
  command->add_flag("--build-only", options->build_only,
                    "build the experts into the cache and stop: no GPU needed, so a machine without one can fill the "
                    "cache (D2K_CACHE_DIR) a GPU machine then reads");
  add_run_options(*command, options->run);
  options->run.include_hidden = true;  // the experts run on every workload
  return {command, [options, &global] {
            const auto& run = options->run;
            const auto context = make_context(global.root);
            const auto tasks = matching_tasks(context.tasks_dir, options->task_globs);
            if (options->build_only) return build_experts(run, context, tasks);
            const auto environment = make_environment(environment_options(run, context));
            const auto solutions = expert_solutions(tasks, environment.device);
            const auto observer = progress_observer(run);
            Evaluator evaluator(environment, eval_settings(run, environment.device), observer.get());
            std::vector<const Task*> selected;
            for (const auto& task : tasks) selected.push_back(&task);
            say_smoke_tier(selected, evaluator.settings());
            return evaluate_and_report(run, environment, evaluator, *observer, [&] {
              std::vector<Trace> traces;
              for (std::size_t i = 0; i < tasks.size(); ++i) {
                auto task_traces = evaluator.evaluate(tasks[i], solutions[i]);
                traces.insert(traces.end(), task_traces.begin(), task_traces.end());
              }
              return traces;
            });
          }};
}

}  // namespace d2k
