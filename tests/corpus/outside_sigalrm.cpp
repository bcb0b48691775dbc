// Round 2, class 5 (threats 18, 4 and 5): work done by a signal handler between the timed calls. In
// d2k_prepare it installs a SIGALRM handler and arms an interval timer (setitimer, every 200 us; alarm()
// re-armed from the handler when setitimer is refused). The handler runs on the worker's own thread, in
// the middle of whatever the worker does between two calls (patching inputs, poisoning outputs,
// flushing the cache), and computes the outputs of every rotated copy whose outputs were just poisoned
// (between_calls.h); the timed call then finds them written and returns at once. No thread is created.
// Each refusal is its error; the checked calls compute honestly.
// Expected: runtime_error, "Operation not permitted" (seccomp refuses rt_sigaction of a handler, setitimer
// and alarm). Were they allowed, the timed calls would return in nanoseconds: below the speed of light.
#include "between_calls.h"  // an honest quant/fp8_group_quant, and the work between calls
#include "timed_calls.h"

#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

namespace {

bool use_alarm = false;

void on_alarm(int) {
  const int saved = errno;
  between::tick();
  if (use_alarm) ::alarm(1);
  errno = saved;
}

}  // namespace

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  std::string refused;
  struct sigaction action {};
  action.sa_handler = on_alarm;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (::sigaction(SIGALRM, &action, nullptr) != 0) {
    refused = std::string("sigaction(SIGALRM): ") + std::strerror(errno);
  } else {
    const itimerval every{{0, 200}, {0, 200}};
    if (::setitimer(ITIMER_REAL, &every, nullptr) != 0) {
      refused = std::string("setitimer(ITIMER_REAL): ") + std::strerror(errno);
      errno = 0;
      use_alarm = true;
      ::alarm(1);
      if (errno != 0) refused += std::string("; alarm: ") + std::strerror(errno);
      else refused.clear();
    }
  }
  if (refused.empty()) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "no work between the calls: %s", refused.c_str());
  return 1;
}

extern "C" int d2k_run(const d2k_call* call) { return between::run(call, timing_started(call)); }
