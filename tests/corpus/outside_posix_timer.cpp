// Round 2, class 5 (threats 18, 4 and 5): work done by a POSIX timer between the timed calls. In
// d2k_prepare it creates a timer (timer_create) that fires every 200 us and calls a function on a thread
// that glibc starts for it (SIGEV_THREAD, so no signal handler of its own); when that is refused, a timer
// that raises SIGRTMIN, with a handler for it. What fires computes the outputs of every rotated copy whose
// outputs were just poisoned (between_calls.h); the timed call then finds them written and returns at
// once. Each refusal is its error; the checked calls compute honestly.
// Expected: runtime_error, "Operation not permitted" (seccomp refuses timer_create and rt_sigaction of a
// handler). Had the SIGEV_THREAD timer been created, its thread would be caught: rejected, "thread(s)
// running".
#include "between_calls.h"  // an honest quant/fp8_group_quant, and the work between calls
#include "timed_calls.h"

#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <string>

namespace {

std::string arm(timer_t timer) {
  const itimerspec every{{0, 200000}, {0, 200000}};
  return ::timer_settime(timer, 0, &every, nullptr) == 0 ? "" : std::string("timer_settime: ") + std::strerror(errno);
}

}  // namespace

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  timer_t timer{};
  sigevent on_thread{};
  on_thread.sigev_notify = SIGEV_THREAD;
  on_thread.sigev_notify_function = [](sigval) { between::tick(); };
  std::string refused;
  if (::timer_create(CLOCK_MONOTONIC, &on_thread, &timer) == 0) {
    refused = arm(timer);
  } else {
    refused = std::string("timer_create(SIGEV_THREAD): ") + std::strerror(errno);
    struct sigaction action {};
    action.sa_handler = [](int) { between::tick(); };
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigevent on_signal{};
    on_signal.sigev_notify = SIGEV_SIGNAL;
    on_signal.sigev_signo = SIGRTMIN;
    if (::sigaction(SIGRTMIN, &action, nullptr) != 0) {
      refused += std::string("; sigaction(SIGRTMIN): ") + std::strerror(errno);
    } else if (::timer_create(CLOCK_MONOTONIC, &on_signal, &timer) != 0) {
      refused += std::string("; timer_create(SIGEV_SIGNAL): ") + std::strerror(errno);
    } else if (std::string error = arm(timer); !error.empty()) {
      refused += "; " + error;
    } else {
      refused.clear();
    }
  }
  if (refused.empty()) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "no work between the calls: %s", refused.c_str());
  return 1;
}

extern "C" int d2k_run(const d2k_call* call) { return between::run(call, timing_started(call)); }
