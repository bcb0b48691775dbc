// `d2k eval <task> <solution>`: one solution on the task's workloads (only that task is loaded).
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

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
  std::vector<std::string> profile_metrics;
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
  command->add_option("--profile-metrics", options->profile_metrics,
                      "with --profile: more Nsight Compute metrics by name, comma-separated (e.g. "
                      "smsp__issue_active.avg.pct_of_peak_sustained_active), printed per kernel under the table")
      ->delimiter(',');
  return {command, [options, &global] {
            const auto& run = options->run;
            if (!options->profile && !options->profile_metrics.empty())
              fail("--profile-metrics goes with --profile (it names what the profile reads)");
            const auto context = make_context(global.root);
            const Task task = load_task(context.tasks_dir, options->task);
            const Solution solution = load_solution(options->solution);
            const auto environment = make_environment(environment_options(run, context));
            if (options->profile) {
              if (run.repeat > 1) fail("--profile runs once: leave out --repeat");
              return profile_and_report(std::cout, task, solution, environment, eval_settings(run, environment.device),
                                        options->profile_metrics);
            }
            const auto observer = progress_observer(run);
            Evaluator evaluator(environment, eval_settings(run, environment.device), observer.get());
            say_smoke_tier({&task}, evaluator.settings());
            return evaluate_and_report(run, environment, evaluator, *observer,
                                       [&] { return evaluator.evaluate(task, solution); });
          }};
}

}  // namespace d2k
