// Threat 14, build time: a solution that includes a host file so that the compiler's error shows it.
// Under the sandbox the file is not there: a compile_error whose log holds none of its content.
#include "/etc/passwd"
#include "/root/.bashrc"

#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call*) { return 0; }
