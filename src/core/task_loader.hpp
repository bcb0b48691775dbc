// Reads tasks/<family>/<name>/task.toml (docs/task-format.md) and guidance.md into a d2k::Task and
// enforces every rule of the format. Errors are d2k::Error naming the file, line, field path (e.g.
// `workloads[2].axes.T`) and the offending value; unknown keys are errors so typos cannot pass.
#pragma once

#include <filesystem>
#include <vector>

#include "core/task.hpp"

namespace d2k {

// `task_dir` is tasks_root/<family>/<name>; the task's name is "<family>/<name>", taken from the path.
Task load_task(const std::filesystem::path& task_dir, const std::filesystem::path& tasks_root);

// Every tasks_root/*/*/task.toml, sorted by task name.
std::vector<Task> load_tasks(const std::filesystem::path& tasks_root);

// The task `name` ("<family>/<name>") of tasks_root, read from tasks_root/<family>/<name>/task.toml
// without reading any other task; "no task 'x' (known: ...)" when there is none. Pass the name as a
// std::string: a string literal would match the overload above as well.
Task load_task(const std::filesystem::path& tasks_root, const std::string& name);

}  // namespace d2k
