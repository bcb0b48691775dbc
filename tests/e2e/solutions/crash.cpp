// Must yield runtime_error: dereferences a null pointer (SIGSEGV in the worker, not in d2k).
#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  volatile int* nowhere = nullptr;
  *nowhere = call->num_inputs;
  return 0;
}
