// The worker process: the only place candidate code runs. It reads a WorkerRequest from its control
// stream, sets up (device, buffers: while the orchestrator may still be making the draws), reads the input
// draws, loads the solution's shared object, runs it (the second draw, its repeat, the checked call, the
// timed calls, a call left out) and sends the evidence, frame by frame, right after the call that produced
// it (core/worker_protocol.hpp). It never sees reference outputs and links no torch.
//
// Exit codes: 0 when the `end` frame was sent (whatever the solution did: a failure is a frame); 2 for a
// bad command line, request or draws; 3 when the worker itself could not set up (memory, device) or lost
// its evidence stream. A crash of the solution ends the process by its signal. Once the solution is
// loaded the worker does not return: it ends with _exit right after the `end` frame, so that no code of
// the solution's (an atexit handler, a static destructor) runs later.
#pragma once

namespace d2k {

int worker_main(int argc, char** argv);

}  // namespace d2k
