#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "timing/timer.hpp"

using namespace d2k;

TEST(Timer, CpuStopsAtMinSamplesOnceTimeIsUp) {
  TimingConfig config;
  config.warmup = 2;
  config.min_samples = 5;
  config.max_samples = 50;
  config.max_seconds = 0.0;
  int calls = 0;
  std::vector<double> samples = measure(
      Device::cpu, [&] { ++calls; }, nullptr, config);
  EXPECT_EQ(samples.size(), 5u);
  EXPECT_EQ(calls, 7);
}

TEST(Timer, CpuStopsAtMaxSamplesAndTimesTheCall) {
  TimingConfig config;
  config.warmup = 1;
  config.min_samples = 2;
  config.max_samples = 6;
  config.max_seconds = 60.0;
  config.target_ci = 0.0;  // the precision rule off: only the cap stops it
  config.flush_l2 = true;  // ignored on the cpu device: nothing but the call is in a sample
  auto sleepy = [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
  std::vector<double> samples = measure(Device::cpu, sleepy, nullptr, config);
  ASSERT_EQ(samples.size(), 6u);
  for (double ms : samples) {
    EXPECT_GE(ms, 2.0);
    EXPECT_LT(ms, 200.0);
  }
}

TEST(Timer, AStableCallStopsOnceTheMedianIsPreciseEnough) {
  TimingConfig config;
  config.warmup = 0;
  config.min_samples = 10;
  config.max_samples = 200;
  config.max_seconds = 60.0;
  // Generous, so a busy CI machine's scheduling jitter cannot keep it sampling: the rule is under
  // test here, ANoisyCallSamplesOnToTheCap below shows it does not stop a truly noisy call.
  config.target_ci = 5.0;
  config.flush_l2 = false;
  auto steady = [] { std::this_thread::sleep_for(std::chrono::milliseconds(1)); };
  EXPECT_EQ(measure(Device::cpu, steady, nullptr, config).size(), 10u);
}

TEST(Timer, ANoisyCallSamplesOnToTheCap) {
  TimingConfig config;
  config.warmup = 0;
  config.min_samples = 10;
  config.max_samples = 40;
  config.max_seconds = 60.0;
  config.target_ci = 0.01;
  config.flush_l2 = false;
  int call = 0;
  // Alternately fast and slow: the median's interval spans both modes and never narrows to 1%.
  auto noisy = [&] { std::this_thread::sleep_for(std::chrono::microseconds(++call % 2 ? 200 : 3000)); };
  EXPECT_EQ(measure(Device::cpu, noisy, nullptr, config).size(), 40u);
}

TEST(Timer, ExceptionsFromTheCallPropagate) {
  TimingConfig config;
  config.warmup = 0;
  int calls = 0;
  auto failing = [&] {
    if (++calls == 3) throw std::runtime_error("third call failed");
  };
  EXPECT_THROW(measure(Device::cpu, failing, nullptr, config), std::runtime_error);
  EXPECT_EQ(calls, 3);
}
