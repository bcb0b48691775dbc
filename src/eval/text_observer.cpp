#include "eval/text_observer.hpp"

#include <fmt/format.h>

namespace d2k {

void TextObserver::building(const Task& task, const Solution& solution) {
  out_ << fmt::format("{}: building {}", task.name, solution.name) << std::endl;
}

void TextObserver::built(const Task& task, const BuildResult& build) {
  out_ << fmt::format("{}: build {} in {:.1f} s{}", task.name, build.ok ? "ok" : "FAILED", build.seconds,
                      build.cached ? " (cached)" : "")
       << std::endl;
}

void TextObserver::step(const WorkloadProgress& at, std::string_view what) {
  out_ << fmt::format("[{}/{}] {} {}: {} (at {:.1f} s)", at.index, at.count, at.task.name, at.workload.name, what,
                      at.elapsed_seconds)
       << std::endl;
}

void TextObserver::finished(const WorkloadProgress& at, const Trace& trace) {
  out_ << fmt::format("[{}/{}] {} {}: {} in {:.1f} s", at.index, at.count, at.task.name, at.workload.name,
                      name_of(trace.status), at.elapsed_seconds)
       << std::endl;
}

void TextObserver::run_started(int run, int runs, uint64_t seed) {
  if (runs > 1) out_ << fmt::format("d2k: run {} of {} (seed {})", run, runs, seed) << std::endl;
}

}  // namespace d2k
