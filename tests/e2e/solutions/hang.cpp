// Must yield timeout: never returns.
#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  volatile bool forever = true;
  while (forever) {
  }
  return 0;
}
