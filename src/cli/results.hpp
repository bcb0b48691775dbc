// What eval and bench do with their traces: the table on stdout, the --json document, the exit status.
#pragma once

#include <functional>
#include <vector>

#include "cli/run_options.hpp"
#include "core/trace.hpp"
#include "eval/environment.hpp"
#include "eval/evaluator.hpp"

namespace d2k {

// Runs `evaluate_once` options.repeat times with consecutive seeds (each run announced to `observer`), or
// fewer where options.time_limit stops it before a run (said on stderr; the document's `runs` holds those
// done, `runs_requested` the number asked for); one run prints the trace table and its summary, more
// print the repeat table; --json holds the same. Returns the exit status: 0 when every run done passed,
// else 1.
int evaluate_and_report(const RunOptions& options, const EvalEnvironment& environment, Evaluator& evaluator,
                        EvalObserver& observer, const std::function<std::vector<Trace>()>& evaluate_once);

}  // namespace d2k
