// What the round-2 clock patchers share (ROUND2.md, class 4): clocks that run at half speed, and the
// redirection of every GOT slot of the host clock functions (clock_gettime, gettimeofday, std::chrono's
// steady_clock::now and system_clock::now) in the worker and every library it loaded (got_patch.h) to them.
// A timer that reads a half-speed clock reports half of every duration.
#pragma once

#include <dlfcn.h>
#include <sys/time.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "got_patch.h"

namespace slow {

using ClockGettime = int (*)(clockid_t, timespec*);
using Gettimeofday = int (*)(timeval*, void*);

inline ClockGettime real_clock_gettime = nullptr;
inline Gettimeofday real_gettimeofday = nullptr;

constexpr int kClocks = 16;
inline std::atomic<int64_t> base_ns[kClocks + 1];  // per clock id, then gettimeofday's
inline std::atomic<bool> has_base[kClocks + 1];

// Half speed from the first reading on: base + (now - base) / 2.
inline int64_t halve(int which, int64_t now) {
  bool expected = false;
  if (has_base[which].compare_exchange_strong(expected, true)) base_ns[which].store(now);
  const int64_t base = base_ns[which].load();
  return base + (now - base) / 2;
}

inline int slow_clock_gettime(clockid_t id, timespec* ts) {
  const int result = real_clock_gettime(id, ts);
  if (result != 0 || id < 0 || id >= kClocks) return result;
  const int64_t ns = halve(id, int64_t(ts->tv_sec) * 1000000000 + ts->tv_nsec);
  ts->tv_sec = ns / 1000000000;
  ts->tv_nsec = ns % 1000000000;
  return result;
}

// std::chrono's clocks read the same clocks, halved once (the real now() would go through a patched
// clock_gettime slot of libstdc++'s and be halved twice).
inline int64_t slow_steady() {
  timespec ts{};
  slow_clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline int64_t slow_system() {
  timespec ts{};
  slow_clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline int slow_gettimeofday(timeval* tv, void* zone) {
  const int result = real_gettimeofday(tv, zone);
  if (result != 0 || tv == nullptr) return result;
  const int64_t us = halve(kClocks, int64_t(tv->tv_sec) * 1000000 + tv->tv_usec);
  tv->tv_sec = us / 1000000;
  tv->tv_usec = us % 1000000;
  return result;
}

struct Target {
  const char* symbol;
  void** real;  // where the original goes; nullptr for a fake that needs none
  void* fake;
};

inline std::vector<Target> host_targets() {
  return {{"clock_gettime", reinterpret_cast<void**>(&real_clock_gettime), reinterpret_cast<void*>(&slow_clock_gettime)},
          {"gettimeofday", reinterpret_cast<void**>(&real_gettimeofday), reinterpret_cast<void*>(&slow_gettimeofday)},
          {"_ZNSt6chrono3_V212steady_clock3nowEv", nullptr, reinterpret_cast<void*>(&slow_steady)},
          {"_ZNSt6chrono3_V212system_clock3nowEv", nullptr, reinterpret_cast<void*>(&slow_system)}};
}

struct Outcome {
  int patched = 0;
  std::vector<std::string> refused;  // "<symbol> in <object>: why"
};

// Points every slot of every target at its fake. with_mprotect: a read-only slot is made writable first;
// without, a read-only slot is left alone and reported.
inline Outcome patch(const std::vector<Target>& targets, bool with_mprotect) {
  std::vector<std::string> symbols;
  for (const Target& target : targets) symbols.push_back(target.symbol);
  Outcome outcome;
  if (real_clock_gettime == nullptr) real_clock_gettime = reinterpret_cast<ClockGettime>(::dlsym(RTLD_DEFAULT, "clock_gettime"));
  if (real_clock_gettime == nullptr) return outcome;
  const std::vector<scan::Region> regions = scan::regions();
  for (const got::Slot& slot : got::slots(symbols)) {
    for (const Target& target : targets) {
      if (slot.symbol != target.symbol || *slot.address == target.fake) continue;
      // The function itself, from dlsym: a lazily bound slot may still hold its PLT stub, whose resolver
      // would write the real address back over the fake.
      if (target.real != nullptr && *target.real == nullptr) *target.real = ::dlsym(RTLD_DEFAULT, target.symbol);
      if (target.real != nullptr && *target.real == nullptr) continue;
      const std::string where = slot.symbol + " in " + (slot.object.empty() ? "the worker" : slot.object);
      const scan::Region* region = scan::region_of(regions, slot.address);
      if (!with_mprotect && (region == nullptr || !region->writable)) {
        outcome.refused.push_back(where + ": the GOT slot is read-only");
        continue;
      }
      const std::string error = with_mprotect ? got::write_with_mprotect(slot.address, target.fake) : "";
      if (!with_mprotect) *slot.address = target.fake;
      if (error.empty()) {
        ++outcome.patched;
      } else {
        outcome.refused.push_back(where + ": " + error);
      }
    }
  }
  return outcome;
}

}  // namespace slow
