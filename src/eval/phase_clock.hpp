// Wall time of the consecutive phases of evaluating one workload (trace.phases).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/trace.hpp"

namespace d2k {

class PhaseClock {
 public:
  // Ends the running phase, if any, and starts `name`.
  void next(std::string name) {
    stop();
    running_ = std::move(name);
    started_ = Clock::now();
  }
  // Ends the running phase.
  void stop() {
    if (running_.empty()) return;
    phases_.push_back({running_, std::chrono::duration<double>(Clock::now() - started_).count()});
    running_.clear();
  }
  // Ends the running phase and replaces it by `parts` (measured inside it, by the worker), with the
  // rest of its time, never negative, first as `rest`.
  void split(const std::vector<Phase>& parts, const std::string& rest) {
    stop();
    if (phases_.empty()) return;
    const double whole = phases_.back().seconds;
    phases_.pop_back();
    double inside = 0;
    for (const auto& part : parts) inside += part.seconds;
    phases_.push_back({rest, std::max(0.0, whole - inside)});
    phases_.insert(phases_.end(), parts.begin(), parts.end());
  }
  const std::vector<Phase>& phases() const { return phases_; }

 private:
  using Clock = std::chrono::steady_clock;
  std::vector<Phase> phases_;
  std::string running_;
  Clock::time_point started_;
};

}  // namespace d2k
