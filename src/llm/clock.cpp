#include "llm/clock.hpp"

#include <chrono>
#include <thread>

namespace d2k::llm {

double SystemClock::now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double SystemClock::unix_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void SystemClock::sleep(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

std::shared_ptr<Clock> system_clock() {
  static const std::shared_ptr<Clock> clock = std::make_shared<SystemClock>();
  return clock;
}

double FakeClock::now() {
  std::lock_guard lock(mutex_);
  return t_;
}

double FakeClock::unix_time() {
  std::lock_guard lock(mutex_);
  return start_unix_ + t_;
}

void FakeClock::sleep(double seconds) {
  std::lock_guard lock(mutex_);
  sleeps_.push_back(seconds);
  if (seconds > 0) t_ += seconds;
}

void FakeClock::advance(double seconds) {
  std::lock_guard lock(mutex_);
  t_ += seconds;
}

std::vector<double> FakeClock::sleeps() {
  std::lock_guard lock(mutex_);
  return sleeps_;
}

}  // namespace d2k::llm
