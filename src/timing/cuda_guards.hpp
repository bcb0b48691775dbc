// CUDA state a solution can leave behind to cheat the timer or the next call (integrity.md, issue 10):
// lines pinned in the persisting L2 survive the harness's flush, so the next call starts warm; a stream
// left capturing turns the harness's own event records and flushes into graph nodes, so several timed
// calls are recorded once and replayed as one; an error left pending is charged to whatever the
// harness does next. The worker pins the persisting-L2 limit to 0 at set-up, resets persisting lines
// before every call (untimed), and asks call_left_state() after every call. Only with D2K_WITH_CUDA.
#pragma once

#ifdef D2K_WITH_CUDA
#include <cuda_runtime.h>

#include <optional>
#include <string>

namespace d2k {

// Sets the device's persisting-L2 set-aside (cudaLimitPersistingL2CacheSize) to 0, at set-up. A GPU
// without one (before Ampere, or a MIG slice) reports the limit as unsupported: then nothing can be
// pinned and there is nothing to do. Throws d2k::Error on any other failure, or when the limit reads
// back above 0.
void pin_no_l2_persistence();

// Demotes every persisting L2 line to normal (cudaCtxResetPersistingL2Cache), before every call and
// outside the timed region: whatever a previous call pinned is evictable again by the flush. Throws
// d2k::Error on failure.
void reset_persisting_l2();

// What the call just made left behind, in words, or nothing when it left a clean state: the
// persisting-L2 limit above 0; an access policy window on `stream` (the call's); `stream` or the legacy
// stream (where any blocking stream's capture shows) still capturing a graph; a CUDA error pending.
// Call it after the call's synchronization. It ends no capture and leaves a pending error pending (the
// worker's own error path still sees it); only errors its own queries raise are cleared.
std::optional<std::string> call_left_state(cudaStream_t stream);

// The capture part of call_left_state alone: `stream`, the per-thread default stream or a blocking stream
// still capturing a graph, in words, or nothing. A stream that cannot be queried (a context a fault broke)
// counts as not capturing: after a device error, a capture left on is what made the worker's own
// synchronization fail, and anything else is the fault itself.
std::optional<std::string> capture_left_on(cudaStream_t stream);

}  // namespace d2k
#endif
