// Device locks with fake devices: timing (exclusive) never overlaps anything on its device, checks
// (shared) overlap one another, devices are independent, a waiting benchmark is not starved by checks,
// the flock holds across lock objects (as across processes), and the journal records every hold.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "campaign/device_locks.hpp"

namespace d2k::campaign {
namespace {

using namespace std::chrono_literals;

struct Device {
  std::atomic<int> readers{0}, writers{0}, max_readers{0};
  std::atomic<bool> violated{false};
};

void work(DeviceLocks& locks, Device& d, int index, bool exclusive) {
  const auto hold = locks.hold(index, exclusive);
  if (exclusive) {
    if (d.writers.fetch_add(1) != 0 || d.readers.load() != 0) d.violated = true;
    std::this_thread::sleep_for(2ms);
    if (d.readers.load() != 0) d.violated = true;
    d.writers.fetch_sub(1);
  } else {
    const int now = d.readers.fetch_add(1) + 1;
    if (d.writers.load() != 0) d.violated = true;
    int seen = d.max_readers.load();
    while (now > seen && !d.max_readers.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(2ms);
    d.readers.fetch_sub(1);
  }
}

TEST(DeviceLocks, TimingIsExclusiveChecksShareAndDevicesAreIndependent) {
  DeviceLocks locks;
  Device devices[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) work(locks, devices[t % 2], t % 2, (i + t) % 4 == 0);
    });
  for (auto& t : threads) t.join();
  for (auto& d : devices) {
    EXPECT_FALSE(d.violated);
    EXPECT_GT(d.max_readers.load(), 1);  // checks ran side by side
  }
}

TEST(DeviceLocks, AWaitingBenchmarkGoesBeforeNewChecks) {
  DeviceLocks locks;
  auto first = locks.hold(0, false);
  std::atomic<bool> timed{false}, checked_after{false};
  std::thread writer([&] {
    const auto hold = locks.hold(0, true);
    timed = true;
  });
  std::this_thread::sleep_for(20ms);  // the writer waits for the first check
  std::thread reader([&] {
    const auto hold = locks.hold(0, false);
    checked_after = timed.load();  // the new check waited for the benchmark
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(timed);
  first.reset();
  writer.join();
  reader.join();
  EXPECT_TRUE(timed);
  EXPECT_TRUE(checked_after);
}

TEST(DeviceLocks, TheFileLockHoldsAcrossLockObjects) {
  const auto dir = std::filesystem::temp_directory_path() / ("d2k_test_locks_" + std::to_string(::getpid()));
  DeviceLocks one(dir), two(dir);  // two processes' worth: each its own descriptors
  auto held = one.hold(3, true);
  std::atomic<bool> got{false};
  std::thread other([&] {
    const auto hold = two.hold(3, false);
    got = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(got);
  auto elsewhere = two.hold(4, true);  // another device is free
  held.reset();
  other.join();
  EXPECT_TRUE(got);
  EXPECT_TRUE(std::filesystem::exists(dir / "device-3.lock"));
}

TEST(DeviceLocks, TheJournalHasEveryHoldAndNoExclusiveOneOverlapsAnotherOfItsDevice) {
  const auto file = std::filesystem::temp_directory_path() / ("d2k_test_holds_" + std::to_string(::getpid()) + ".jsonl");
  std::filesystem::remove(file);
  Device devices[2];
  {
    DeviceLocks locks;
    locks.journal_to(file);
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 20; ++i) work(locks, devices[t % 2], t % 2, (i + t) % 3 == 0);
      });
    for (auto& t : threads) t.join();
  }
  struct Hold {
    int device;
    bool exclusive;
    double acquired, released;
  };
  std::vector<Hold> holds;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    holds.push_back({j.at("device").get<int>(), j.at("exclusive").get<bool>(), j.at("acquired").get<double>(),
                     j.at("released").get<double>()});
    EXPECT_EQ(j.at("pid").get<long>(), static_cast<long>(::getpid()));
  }
  ASSERT_EQ(holds.size(), 120u);
  int exclusive = 0, shared_overlaps = 0;
  for (size_t a = 0; a < holds.size(); ++a) {
    EXPECT_LE(holds[a].acquired, holds[a].released);
    exclusive += holds[a].exclusive;
    for (size_t b = a + 1; b < holds.size(); ++b) {
      const bool overlap = holds[a].device == holds[b].device && holds[a].acquired < holds[b].released &&
                           holds[b].acquired < holds[a].released;
      if (overlap && (holds[a].exclusive || holds[b].exclusive))
        ADD_FAILURE() << "holds " << a << " and " << b << " of device " << holds[a].device << " overlap";
      shared_overlaps += overlap;
    }
  }
  EXPECT_EQ(exclusive, 40);       // (i + t) % 3 == 0 for 40 of the 120 (t, i)
  EXPECT_GT(shared_overlaps, 0);  // checks ran side by side, and the journal shows it
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace d2k::campaign
