// Threat 14, network: a solution that phones home from d2k_prepare. Paired with the task's expert
// d2k_run (tests/e2e/sandbox_cpu.sh builds the folder). Under the sandbox the connection must fail and
// the evaluation passes; if it connects, the solution says so and the trace is a runtime_error.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

// The port tests/e2e/sandbox_*.sh listens on, on the host's loopback.
static const int kPort = 47219;

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;  // no socket at all: the sandbox held
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(kPort);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int connected = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::close(fd);
  if (connected == 0) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "escaped: connected to 127.0.0.1:%d", kPort);
    return 1;
  }
  return 0;
}

extern "C" void d2k_release(void*) {}
