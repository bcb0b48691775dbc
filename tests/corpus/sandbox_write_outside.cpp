// Threat 14, files: a solution that writes outside its request folder (to leave a result for a later
// run, or to tamper with the harness). Paired with the expert d2k_run. Every write must fail; one
// that lands is reported as an error.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "d2k/solution.h"

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  std::string landed;
  for (const char* path : {"/tmp/d2k-sandbox-escape", "../d2k-sandbox-escape", "/usr/d2k-sandbox-escape",
                           "/etc/d2k-sandbox-escape"}) {
    int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) continue;
    bool wrote = ::write(fd, "escaped\n", 8) == 8;
    ::close(fd);
    if (wrote) landed += std::string(landed.empty() ? "" : ", ") + path;
  }
  if (landed.empty()) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "escaped: wrote %s", landed.c_str());
  return 1;
}

extern "C" void d2k_release(void*) {}
