// Round 2, class 1 (threats 16 and 6): steals what the orchestrator sends the worker. In d2k_prepare and
// at every timed call it reads whatever is waiting on stdin and on every pipe or socket it may read (the
// control stream is one of them, whatever number the worker moved it to), without blocking, and looks in
// it for the token (a JSON key "token", or 32 hex digits). It computes every call honestly; in d2k_release
// it forges, with the stolen token (or an all-zero one when it found none), a `samples` frame claiming a
// tenth of its time and an `end` frame, into every open descriptor. The log says how much it stole.
// Expected: rejected, "the evidence stream carried a frame the worker did not write" (the worker read the
// whole control stream before the solution was loaded and stdin is /dev/null, so the log says "stole 0
// bytes" and the token is a guess; were the token stolen, the seq would still collide with the worker's).
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below
#include "timed_calls.h"

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>

#include "forge_frames.h"

namespace {

size_t stolen_bytes = 0;
std::set<std::string> tokens;
double last_ms = 1.0;
int calls = 0;

void steal() {
  char buffer[65536];
  for (int fd : forge::open_fds()) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags == -1 || (flags & O_ACCMODE) == O_WRONLY || !(fd == 0 || forge::is_pipe(fd))) continue;
    for (;;) {
      pollfd ready{fd, POLLIN, 0};
      if (::poll(&ready, 1, 0) <= 0 || (ready.revents & POLLIN) == 0) break;
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n <= 0) break;
      stolen_bytes += size_t(n);
      forge::token_candidates(buffer, size_t(n), tokens);
    }
  }
}

}  // namespace

extern "C" int d2k_prepare(const d2k_call*, void** prepared) {
  *prepared = nullptr;
  steal();
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  ++calls;
  if (timing_started(call)) steal();
  const auto start = std::chrono::steady_clock::now();
  quantize(call);
  last_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return 0;
}

extern "C" void d2k_release(void*) {
  std::set<std::string> candidates = tokens;
  if (candidates.empty()) candidates.insert(std::string(2 * forge::kTokenBytes, '0'));
  int landed = 0;
  for (const std::string& hex : candidates) {
    forge::Token token;
    if (!forge::parse_token(hex, token)) continue;
    const uint64_t seq = uint64_t(calls) + 1;
    std::string forged = forge::samples_frame(seq, token, calls, 0.1 * last_ms);
    forged += forge::end_frame(seq + 1, token);
    landed += forge::write_everywhere(forged);
  }
  std::printf("cheat: stole %zu bytes, %zu token candidates; forged frames took in %d writes\n", stolen_bytes,
              tokens.size(), landed);
  std::fflush(stdout);
}
