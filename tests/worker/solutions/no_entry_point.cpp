// Exports no d2k_run (a C++-mangled name does not count): loading must fail and say so.
#include "d2k/solution.h"

int d2k_run(int unused) { return unused; }
