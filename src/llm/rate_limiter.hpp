// Requests per minute per provider endpoint, as a token bucket holding one request: requests are spaced
// 60/rpm seconds apart at most, with no burst at start (a burst is what trips a provider's own limiter).
// Every client of the same base_url in the process shares one bucket.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "llm/clock.hpp"

namespace d2k::llm {

class RateLimiter {
 public:
  explicit RateLimiter(double requests_per_minute) : rpm_(requests_per_minute) {}

  // Takes a token, first waiting on clock until one is there. Callers wait in the order they came:
  // each one reserves its slot under the lock and then sleeps outside it.
  void acquire(Clock& clock);

  // The slowest rate any client of this endpoint asked for wins.
  void limit_to(double requests_per_minute);
  double requests_per_minute();

 private:
  std::mutex mutex_;
  double rpm_;
  double tokens_ = 1;
  double last_ = 0;
  bool started_ = false;
};

// The process-wide limiter for base_url; nullptr when requests_per_minute <= 0 (no limit asked).
std::shared_ptr<RateLimiter> rate_limiter_for(const std::string& base_url, double requests_per_minute);

}  // namespace d2k::llm
