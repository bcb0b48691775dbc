// An observer that writes one line per step to a stream, for people: the build, each workload's steps
// with the time the workload has taken so far, each workload's status, and each run of a repetition.
#pragma once

#include <ostream>

#include "eval/observer.hpp"

namespace d2k {

class TextObserver : public EvalObserver {
 public:
  explicit TextObserver(std::ostream& out) : out_(out) {}
  void building(const Task& task, const Solution& solution) override;
  void built(const Task& task, const BuildResult& build) override;
  void step(const WorkloadProgress& at, std::string_view what) override;
  void finished(const WorkloadProgress& at, const Trace& trace) override;
  void run_started(int run, int runs, uint64_t seed) override;

 private:
  std::ostream& out_;
};

}  // namespace d2k
