// Crashes: writes through the workspace pointer, which is NULL because it asked for none. (A literal
// null dereference would let the compiler emit a trap, SIGILL, instead of the SIGSEGV wanted here.)
#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  static_cast<volatile float*>(call->workspace)[call->num_inputs] = 1.0f;
  return 0;
}
