// Time as the clients see it. Retries, Retry-After and the rate limiter all wait through a Clock, so
// tests can replace it with a FakeClock that records the waits asked for and never sleeps.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

namespace d2k::llm {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now() = 0;        // seconds, monotonic
  virtual double unix_time() = 0;  // seconds since 1970, for Retry-After given as an HTTP date
  virtual void sleep(double seconds) = 0;
};

class SystemClock : public Clock {
 public:
  double now() override;
  double unix_time() override;
  void sleep(double seconds) override;
};

std::shared_ptr<Clock> system_clock();

// Starts at now() = 0 and unix_time() = start_unix; sleep() only advances time and records the wait.
class FakeClock : public Clock {
 public:
  explicit FakeClock(double start_unix = 1.7e9) : start_unix_(start_unix) {}
  double now() override;
  double unix_time() override;
  void sleep(double seconds) override;
  void advance(double seconds);
  std::vector<double> sleeps();  // every sleep() asked for, in order

 private:
  std::mutex mutex_;
  double start_unix_;
  double t_ = 0;
  std::vector<double> sleeps_;
};

}  // namespace d2k::llm
