// Round 2, class 1 (threats 16 and 6): cuts the worker's channels so that it can neither hear the
// orchestrator nor report what the solution did. In d2k_prepare: close_range over every descriptor above
// stderr, then close() on each descriptor from 0 to 1023 and each one /proc/self/fd lists. A descriptor
// that stays open is reported as the solution's error; every call computes honestly, so nothing but the
// refusal can end it.
// Expected: runtime_error, "Operation not permitted" (seccomp refuses close and close_range on the two
// channel descriptors; the message names each that stayed open, e.g. "close(1017) pipe:[...]"). Had the
// channels closed, the worker could send no evidence and no `end` frame: never passed.
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "forge_frames.h"

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  std::string refused;
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
    refused += std::string("close_range(3, ~0): ") + std::strerror(errno) + "; ";
#endif
  for (int fd : forge::open_fds()) {
    const std::string what = forge::describe_fd(fd);
    if (::close(fd) != 0 && errno != EBADF)
      refused += "close(" + std::to_string(fd) + ") " + what + ": " + std::strerror(errno) + "; ";
  }
  if (refused.empty()) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "the worker's channels stayed open: %s", refused.c_str());
  return 1;
}

extern "C" int d2k_run(const d2k_call* call) {
  quantize(call);
  return 0;
}
