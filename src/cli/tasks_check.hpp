// `d2k tasks --check [task...]` and `d2k new-task <family>/<name>`: adding a task is scaffolding its
// folder, filling in what the scaffold marks, and checking until nothing is left (docs/task-format.md).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "cli/context.hpp"

namespace d2k {

// Checks the named tasks (every task when none is named) and prints one line per problem, then a
// summary. Returns 0 when there is no problem, 1 otherwise; an unknown task name is an error.
int run_tasks_check(const Context& context, const std::vector<std::string>& names, std::ostream& out);

// Scaffolds tasks/<family>/<name>/ and says what to do next. Returns 0; a bad name or an existing
// folder is an error.
int run_new_task(const Context& context, const std::string& name, std::ostream& out);

}  // namespace d2k
