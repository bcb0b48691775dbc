// Checking a worker request. Anything wrong here is the orchestrator's mistake, not the solution's: it
// ends the worker with a message instead of evidence.
#pragma once

#include "core/worker_protocol.hpp"

namespace d2k {

// Ranks within D2K_MAX_RANK, no negative sizes or strides, every in-place output matching its input, a
// library and a token. Throws d2k::Error that names the tensor and the value.
void check_request(const WorkerRequest& request);

}  // namespace d2k
