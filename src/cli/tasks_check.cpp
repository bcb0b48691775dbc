#include "cli/tasks_check.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/scaffold.hpp"
#include "core/task.hpp"
#include "eval/task_check.hpp"

namespace d2k {

int run_tasks_check(const Context& context, const std::vector<std::string>& names, std::ostream& out) {
  std::vector<std::filesystem::path> folders;
  if (names.empty()) folders = task_folders(context.tasks_dir);
  for (const auto& name : names) {
    if (!is_task_name(name)) fail("'{}' is not a task name (<family>/<name>)", name);
    const auto folder = context.tasks_dir / name;
    if (!std::filesystem::is_directory(folder)) fail("no task folder '{}' under {}", name, context.tasks_dir.string());
    folders.push_back(folder);
  }
  std::size_t problems = 0, failing = 0;
  for (const auto& folder : folders) {
    const auto found = check_task(folder, context.tasks_dir);
    for (const auto& line : found) out << line << '\n';
    problems += found.size();
    failing += !found.empty();
  }
  if (problems == 0) {
    out << fmt::format("{} task{} checked: no problem\n", folders.size(), folders.size() == 1 ? "" : "s");
    return 0;
  }
  out << fmt::format("{} task{} checked: {} problem{} in {}\n", folders.size(), folders.size() == 1 ? "" : "s", problems,
                     problems == 1 ? "" : "s", failing == 1 ? "1 task" : fmt::format("{} tasks", failing));
  return 1;
}

int run_new_task(const Context& context, const std::string& name, std::ostream& out) {
  const auto dir = scaffold_task(context.tasks_dir, name);
  out << fmt::format(
      "wrote {}/: task.toml, reference.cpp, guidance.md, solution/cuda/, solution/cpu/, notes.md\n"
      "next: replace every TODO (docs/task-format.md), write the reference and the solutions, build d2k (CMake "
      "compiles reference.cpp into it), and run `d2k tasks --check {}` until it reports no problem\n",
      dir.string(), name);
  return 0;
}

}  // namespace d2k
