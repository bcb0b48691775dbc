// An observer for machines: one JSON object per line and event, flushed at once, so that a program
// watching an evaluation (a dashboard, a campaign scheduler) reads its progress as it happens.
//   {"event":"building","task":"norm/x","solution":"my_kernel"}
//   {"event":"built","task":"norm/x","ok":true,"seconds":1.2,"cached":false}
//   {"event":"step","task":"norm/x","workload":"w","index":1,"count":2,"elapsed_seconds":0.1,"step":"oracle"}
//   {"event":"run","run":1,"runs":3,"seed":5}                          (before each run's workloads)
//   {"event":"finished","task":"norm/x","workload":"w","index":1,"count":2,"elapsed_seconds":3.4,
//    "status":"passed","message":"","solution":"cuda","seed":5,"median_ms":0.0182,
//    "phases":[{"name":"worker_start","seconds":0.1},...],"outside_clock":{...},"second_clock":{...}}
// (seed: the run's, as --seed and --repeat give it; median_ms: the solution's, when it was timed;
// phases: the trace's, in order; the clocks: the trace's, when it has them)
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>

#include "eval/observer.hpp"

namespace d2k {

class JsonLinesObserver : public EvalObserver {
 public:
  explicit JsonLinesObserver(std::ostream& out) : out_(out) {}
  void building(const Task& task, const Solution& solution) override;
  void built(const Task& task, const BuildResult& build) override;
  void step(const WorkloadProgress& at, std::string_view what) override;
  void finished(const WorkloadProgress& at, const Trace& trace) override;
  void run_started(int run, int runs, uint64_t seed) override;

 private:
  std::ostream& out_;
  std::optional<uint64_t> seed_;  // of the run under way
};

}  // namespace d2k
