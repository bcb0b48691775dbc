// `d2k tasks --check`: what docs/task-format.md and a complete task ask for, checked by a program:
// task.toml loads (fields, formulas on every workload), no scaffold placeholder is left, the smoke and
// hidden tiers exist, guidance has three items per level with checks, the reference code is compiled
// in and runs on a smoke workload, a library path and task.toml's `library` go together, and the
// solutions and notes are there. Each problem is one line naming the file and the field.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace d2k {

// The problems of the task in `task_dir` (tasks_root/<family>/<name>), each "file: field: what is
// wrong" (loader errors carry the line too); empty when there is none.
std::vector<std::string> check_task(const std::filesystem::path& task_dir, const std::filesystem::path& tasks_root);

// Every task folder, tasks_root/<family>/<name>, whether or not it loads; sorted.
std::vector<std::filesystem::path> task_folders(const std::filesystem::path& tasks_root);

}  // namespace d2k
