#include "eval/jsonl_observer.hpp"

#include <nlohmann/json.hpp>

#include "core/json.hpp"

namespace d2k {
namespace {

using nlohmann::json;

json workload_event(const char* event, const WorkloadProgress& at) {
  return {{"event", event},       {"task", at.task.name}, {"workload", at.workload.name},
          {"index", at.index},    {"count", at.count},    {"elapsed_seconds", at.elapsed_seconds}};
}

// One line per event, flushed: a watcher must not wait for a buffer to fill. Invalid UTF-8 in a
// message (a compiler's output) is replaced rather than thrown over.
void write_line(std::ostream& out, const json& event) {
  out << event.dump(-1, ' ', false, json::error_handler_t::replace) << std::endl;
}

}  // namespace

void JsonLinesObserver::building(const Task& task, const Solution& solution) {
  write_line(out_, {{"event", "building"}, {"task", task.name}, {"solution", solution.name}});
}

void JsonLinesObserver::built(const Task& task, const BuildResult& build) {
  write_line(out_, {{"event", "built"}, {"task", task.name}, {"ok", build.ok}, {"seconds", build.seconds},
                    {"cached", build.cached}});
}

void JsonLinesObserver::step(const WorkloadProgress& at, std::string_view what) {
  auto event = workload_event("step", at);
  event["step"] = what;
  write_line(out_, event);
}

void JsonLinesObserver::finished(const WorkloadProgress& at, const Trace& trace) {
  auto event = workload_event("finished", at);
  event["status"] = name_of(trace.status);
  event["message"] = trace.message;
  // What a ledger of seeds needs from a run that may be cut short: which solution, which run's seed,
  // and the time, line by line (the --json document is written only at the end).
  event["solution"] = trace.solution;
  if (seed_) event["seed"] = *seed_;
  if (trace.performance && trace.performance->solution.median_ms > 0)
    event["median_ms"] = trace.performance->solution.median_ms;
  // Where the wall time went (trace.phases, as the --json document has them): a cut run's slow workloads
  // explain themselves.
  event["phases"] = trace.phases;
  // The clock checks' numbers, so that their margins on honest runs (gpu-prebuilt/clock-margins.py) come
  // from a cut run's progress too.
  if (trace.outside_clock) event["outside_clock"] = *trace.outside_clock;
  if (trace.second_clock) event["second_clock"] = *trace.second_clock;
  write_line(out_, event);
}

void JsonLinesObserver::run_started(int run, int runs, uint64_t seed) {
  seed_ = seed;
  write_line(out_, {{"event", "run"}, {"run", run}, {"runs", runs}, {"seed", seed}});
}

}  // namespace d2k
