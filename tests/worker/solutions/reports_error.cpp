// Fails the way a solution should when it cannot handle a call: non-zero and a message.
#include <cstdio>

#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "unsupported rank %d: this kernel handles rank 1",
                static_cast<int>(call->inputs[0].rank));
  return 7;
}
