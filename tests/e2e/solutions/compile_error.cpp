// Must yield compile_error: this is not C++.
#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) { return this is not valid; }
