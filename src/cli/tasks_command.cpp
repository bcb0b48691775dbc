// `d2k tasks`: the list of tasks, one task with the guidance levels asked for, or (--check) what is left
// to do in them.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/table.hpp"
#include "cli/tasks_check.hpp"
#include "core/error.hpp"
#include "core/task_loader.hpp"

namespace d2k {
namespace {

struct TasksOptions {
  std::vector<std::string> tasks;
  std::string levels = "all";
  bool check = false;
};

// "1,2", "L1,L3", "all" or "none".
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

Command add_tasks_command(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<TasksOptions>();
  auto* command = app.add_subcommand("tasks", "list the tasks, show one with its guidance, or check them");
  command->add_option("task", options->tasks, "a task to show, e.g. norm/fused_add_rmsnorm (with --check: the tasks to check)");
  command->add_option("--levels", options->levels, "guidance levels to render: 1,2,3 | all | none")->capture_default_str();
  command->add_flag("--check", options->check, "validate the tasks (all when none is named): one line per problem, exit 1 on any");
  return {command, [options, &global] {
            const auto context = make_context(global.root);
            if (options->check) return run_tasks_check(context, options->tasks, std::cout);
            if (options->tasks.size() > 1) fail("d2k tasks shows one task at a time (several only with --check)");
            if (options->tasks.empty()) print_task_list(std::cout, load_tasks(context.tasks_dir));
            else print_task(std::cout, load_task(context.tasks_dir, options->tasks[0]), parse_levels(options->levels));
            return 0;
          }};
}

}  // namespace d2k
