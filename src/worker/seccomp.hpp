// The worker's own seccomp filter (integrity.md, threat 18: work between the timed calls). Installed
// once the worker's set-up (CUDA context, buffers, channels, the harness's threads) is done and before
// the solution is loaded: from then on nothing in the process can start a timer or an alarm, install a
// signal handler, fork, start a process that shares its memory, exec, submit asynchronous I/O, install
// a seccomp filter of its own, set the clocks, or close or replace the worker's channels. Threads
// (clone with CLONE_THREAD) stay allowed: the kernel counts them after every call (threads.hpp).
// Whatever the worker itself needs of these (ignoring SIGPIPE on the evidence pipe, NVML's set-up)
// must be done before the filter.
//
// The filter stacks on the sandbox launcher's (src/sandbox/restrict.cpp), which already refuses
// namespaces, mounts, ptrace and the network; each syscall is refused if either filter refuses it.
// seccomp.cpp says, call by call, why each refusal costs an honest kernel solution nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace d2k {

// Installs the filter on every thread of the process (SECCOMP_FILTER_FLAG_TSYNC: the CUDA runtime's
// threads, started before, get it too). `protected_fds` are the worker's control and evidence channels:
// close, dup2, dup3 and close_range onto them are refused. Throws d2k::Error when the kernel refuses
// the filter or the machine is not x86-64 (the filter names x86-64 syscall numbers).
//
// With a gate, writes to `gate->fd` (write, writev, pwrite*, send*, sendfile, splice, tee, vmsplice,
// copy_file_range) are refused unless their system call is the instruction that returns to
// `gate->writer` (evidence_write.hpp), and the descriptor cannot be duplicated (dup, fcntl F_DUPFD*)
// to write through another number.
struct EvidenceGate {
  int fd = -1;
  uint64_t writer = 0;
};
void forbid_outside_work(const std::vector<int>& protected_fds, std::optional<EvidenceGate> gate = std::nullopt);

}  // namespace d2k
