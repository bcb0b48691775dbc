// Threads a solution starts. The worker defines pthread_create itself (exported from the executable,
// so that it comes first in the dynamic linker's lookup scope): every thread started through it while
// counting is on is counted from its start until its start routine returns. Reading the count is one
// atomic load, cheap enough to follow every timed call inside the timed region.
#pragma once

namespace d2k {

// From now on, threads started by anyone in the process are counted (call it once the worker's own
// setup and the runtime's are done).
void start_counting_threads();

// Counted threads whose start routine has not returned: work still running outside the call.
int threads_running();

}  // namespace d2k
