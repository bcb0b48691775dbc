// Threat 14/15, processes: a solution that forks until the machine runs out of processes. Paired
// with the expert d2k_run. The forks must stop at the sandbox's limit (far below kForks) and the
// children die with the worker; forking them all is reported as an error.
#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "d2k/solution.h"

static const int kForks = 2000;

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  int forked = 0;
  for (; forked < kForks; ++forked) {
    pid_t pid = ::fork();
    if (pid < 0) break;
    if (pid == 0) {
      ::pause();  // lingers until something kills it
      ::_exit(0);
    }
  }
  if (forked < kForks) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "escaped: forked %d processes", forked);
  return 1;
}

extern "C" void d2k_release(void*) {}
