// `d2k new-task <family>/<name>`: scaffolds the task's folder with every file to fill in (docs/task-format.md).
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/tasks_check.hpp"

namespace d2k {

Command add_new_task_command(CLI::App& app, const GlobalOptions& global) {
  auto name = std::make_shared<std::string>();
  auto* command = app.add_subcommand("new-task", "scaffold tasks/<family>/<name>/ with every file to fill in");
  command->add_option("task", *name, "the new task's <family>/<name>")->required();
  return {command, [name, &global] { return run_new_task(make_context(global.root), *name, std::cout); }};
}

}  // namespace d2k
