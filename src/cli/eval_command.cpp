// `d2k eval <task> <solution>`: one solution on the task's workloads (only that task is loaded).
#include <CLI/CLI.hpp>

#include <memory>

#include <iostream>

#include "cli/commands.hpp"
#include "cli/profile.hpp"
#include "cli/results.hpp"
#include "cli/run_options.hpp"
#include "core/error.hpp"
#include "core/task_loader.hpp"

namespace d2k {
namespace {

struct EvalOptions {
  std::string task;
  std::string solution;
  RunOptions run;
  bool profile = false;
};

}  // namespace

Command add_eval_command(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<EvalOptions>();
  auto* command = app.add_subcommand("eval", "evaluate one solution on a task's workloads");
  command->add_option("task", options->task, "the task, e.g. norm/fused_add_rmsnorm")->required();
  command->add_option("solution", options->solution, "a .cu or .cpp file, or a folder of them")->required();
  add_run_options(*command, options->run);
  command->add_flag("--final", options->run.final, "final evaluation: published and hidden workloads, a fresh seed unless --seed");
  command->add_flag("--profile", options->profile,
                    "Nsight Compute on the solution's kernels of one workload (-w), untimed: time, DRAM traffic, "
                    "throughputs, occupancy per kernel (cuda)");
  return {command, [options, &global] {
            const auto& run = options->run;
            const auto context = make_context(global.root);
            const Task task = load_task(context.tasks_dir, options->task);
            const Solution solution = load_solution(options->solution);
            const auto environment = make_environment(environment_options(run, context));
            if (options->profile) {
              if (run.repeat > 1) fail("--profile runs once: leave out --repeat");
              return profile_and_report(std::cout, task, solution, environment, eval_settings(run, environment.device));
            }
            const auto observer = progress_observer(run);
            Evaluator evaluator(environment, eval_settings(run, environment.device), observer.get());
            say_smoke_tier({&task}, evaluator.settings());
            return evaluate_and_report(run, environment, evaluator, *observer,
                                       [&] { return evaluator.evaluate(task, solution); });
          }};
}

}  // namespace d2k
