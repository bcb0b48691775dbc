#include "llm/rate_limiter.hpp"

#include <algorithm>
#include <map>

namespace d2k::llm {

void RateLimiter::acquire(Clock& clock) {
  double wait = 0;
  {
    std::lock_guard lock(mutex_);
    double now = clock.now();
    double rate = rpm_ / 60.0;  // tokens per second
    if (!started_) {
      started_ = true;
      last_ = now;
    }
    tokens_ = std::min(1.0, tokens_ + (now - last_) * rate);
    last_ = now;
    if (tokens_ < 1) wait = (1 - tokens_) / rate;
    tokens_ -= 1;  // below zero: later callers queue behind this reservation
  }
  if (wait > 0) clock.sleep(wait);
}

void RateLimiter::limit_to(double requests_per_minute) {
  std::lock_guard lock(mutex_);
  rpm_ = std::min(rpm_, requests_per_minute);
}

double RateLimiter::requests_per_minute() {
  std::lock_guard lock(mutex_);
  return rpm_;
}

std::shared_ptr<RateLimiter> rate_limiter_for(const std::string& base_url, double requests_per_minute) {
  if (requests_per_minute <= 0) return nullptr;
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<RateLimiter>> limiters;
  std::lock_guard lock(mutex);
  auto& limiter = limiters[base_url];
  if (limiter == nullptr) {
    limiter = std::make_shared<RateLimiter>(requests_per_minute);
  } else {
    limiter->limit_to(requests_per_minute);
  }
  return limiter;
}

}  // namespace d2k::llm
