// Printers read traces and write them for people; they never measure anything.
#pragma once

#include <ostream>
#include <vector>

#include "core/repeat.hpp"
#include "core/summary.hpp"
#include "core/task.hpp"
#include "core/trace.hpp"

namespace d2k {

// One row per trace: status, eager and solution time, speedup, achieved rate, % of speed of light;
// then the message of every trace that did not pass, the throttled ones, and `summary` (of these traces).
void print_trace_table(std::ostream& out, const std::vector<Trace>& traces, const RunSummary& summary);

// `--repeat N`: per workload, runs passed, the median of the runs' medians, their spread; then every
// run that did not pass.
void print_repeat_table(std::ostream& out, const std::vector<RepeatRow>& rows);

// `d2k tasks`: one line per task. `d2k tasks <name>`: the whole task with its guidance.
void print_task_list(std::ostream& out, const std::vector<Task>& tasks);
void print_task(std::ostream& out, const Task& task, const std::set<int>& levels);

}  // namespace d2k
