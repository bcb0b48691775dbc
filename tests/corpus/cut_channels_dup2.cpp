// Round 2, class 1 (threats 16 and 6): replaces the worker's channels instead of closing them: dup2 of
// /dev/null over every descriptor from 0 to 1023 and every one /proc/self/fd lists (the evidence the worker
// writes then goes nowhere, and what it reads is end of file), and dup3 over each that dup2 could not
// replace. A descriptor it could not replace is reported as the solution's error; every call computes
// honestly, so nothing but the refusal can end it.
// Expected: runtime_error, "Operation not permitted" (seccomp refuses dup2 and dup3 onto the two channel
// descriptors; the message names each, e.g. "dup3(/dev/null, 1017) pipe:[...]"). Had they been
// replaced, the orchestrator would have read no `end` frame: never passed.
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <set>
#include <string>

#include "forge_frames.h"

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "cannot open /dev/null: %s", std::strerror(errno));
    return 1;
  }
  std::set<int> targets;
  for (int fd = 0; fd < 1024; ++fd) targets.insert(fd);
  for (int fd : forge::open_fds()) targets.insert(fd);
  std::string refused;
  for (int fd : targets) {
    if (fd == null) continue;
    const std::string what = forge::describe_fd(fd);
    if (::dup2(null, fd) == fd) continue;
    const std::string dup2_error = std::strerror(errno);
    if (::dup3(null, fd, 0) == fd) continue;
    refused += "dup2(/dev/null, " + std::to_string(fd) + ") " + what + ": " + dup2_error + ", dup3: " +
               std::strerror(errno) + "; ";
  }
  if (refused.empty()) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "the worker's channels stayed in place: %s", refused.c_str());
  return 1;
}

extern "C" int d2k_run(const d2k_call* call) {
  quantize(call);
  return 0;
}
