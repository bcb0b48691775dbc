// The worker process: the only place candidate code runs. It reads a WorkerRequest, loads the
// solution's shared object, runs it once for correctness, writes the outputs, times it if asked, and
// writes a WorkerResult (core/worker_protocol.hpp). It never sees reference outputs and links no torch.
#pragma once

#include <filesystem>

namespace d2k {

// The output files hold the checked (correctness) call's outputs. With timing, a deterministic task's
// timed calls are compared with them bytewise (result.timed_check); any other task's last timed call
// writes <output file>.timed, which the orchestrator checks too: what is checked was also timed.
// result.json says, in the end: status "ok" and phase "done", or status "runtime_error" and the phase
// that failed (load | workspace | prepare | run | timing | release). Before timing, once the outputs
// are written, it says status "ok" and phase "timing": what a crash or a hang while timing leaves behind.
// Every result.json carries the token read from stdin before the solution is loaded (WorkerResult::token).
// Exit codes: 0 when result.json was written (whatever the solution did); 2 for a bad command line,
// request or token; 3 when the worker itself could not set up (memory, device). A crash of the solution
// ends the process by its signal. Once the solution is loaded it does not return: it ends the process
// with _exit right after the last write of result.json, so that no code of the solution's runs later.
int run_worker(const std::filesystem::path& request_file);
int worker_main(int argc, char** argv);

}  // namespace d2k
