// Child processes: the only way d2k runs a compiler or candidate code. A child gets its own process
// group so that a timeout kills everything it started, and its output is capped so that a solution
// printing in a loop cannot exhaust the orchestrator's memory.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <sys/types.h>
#include <string_view>
#include <string>
#include <utility>
#include <vector>

#include "runner/sandbox.hpp"

namespace d2k {

struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0] is looked up on PATH unless it holds a '/'
  std::filesystem::path cwd;      // empty: the current directory
  // Added to (or replacing entries of) the inherited environment; PATH here also steers the lookup.
  std::vector<std::pair<std::string, std::string>> env;
  double timeout_seconds = 60;
  std::size_t output_cap = 1 << 20;  // bytes of merged stdout+stderr kept: half head, half tail
  // The child's stdin: these bytes, then end of file (empty: /dev/null). They go into the pipe before
  // the child starts, so they must fit its buffer (1 MiB at most); a secret handed this way is in no
  // file, argument or environment variable of the child's.
  std::string stdin_data;
  // Set: the child runs under d2k-sandbox (unless its mode is off) with a scrubbed environment;
  // `env` still adds to it.
  std::optional<Sandbox> sandbox;
  // Descriptors of the orchestrator's the child gets, as (ours, its number): every other one is closed.
  // Its numbers start after the conversation's channel (kChildChannelFd + 1).
  std::vector<std::pair<int, int>> inherit;
};

struct ProcessResult {
  enum class End { exited, signaled, timed_out, failed_to_start };
  End end = End::failed_to_start;
  int exit_code = -1;          // exited
  int signal = 0;              // signaled
  std::string output;          // stdout and stderr merged, capped; for failed_to_start, why
  double seconds = 0;          // wall time from start to reaping
  double timeout_seconds = 0;  // the limit it ran under, for describe()

  bool ok() const { return end == End::exited && exit_code == 0; }
  // "exited with code 3", "killed by signal 11 (SIGSEGV)", "timed out after 10.0 s",
  // "failed to start: nvcc: No such file or directory".
  std::string describe() const;
};

// A conversation with a child beyond its log (runner/worker_run.hpp has the one user): bytes for its
// stdin, written as fast as the child reads them (any amount: nothing is buffered up front), and the
// bytes it writes on fd 3 (kChildChannelFd), handed over as they arrive with the time since it started.
class ProcessConversation {
 public:
  virtual ~ProcessConversation() = default;
  // The next bytes for the child's stdin; empty when there is nothing to send now. It may block while the
  // orchestrator makes what comes next (the child waits for it): that time is not counted against the
  // child's timeout.
  virtual std::string_view next_input() = 0;
  // Whether more input may come later (in answer to what the child writes); when not, and nothing is
  // left to send, the child's stdin is closed.
  virtual bool more_input() const { return false; }
  // The first `bytes` of what next_input() returned are in the pipe.
  virtual void input_written(std::size_t bytes) = 0;
  // What the child wrote on fd 3.
  virtual void received(const char* data, std::size_t size, double seconds) = 0;
  // The child is running as `pid` (before anything is sent or received).
  virtual void started(pid_t pid) {}
};
inline constexpr int kChildChannelFd = 3;

// Runs the child to its end (or its timeout). With a conversation, spec.stdin_data must be empty: the
// conversation feeds stdin and hears fd 3; stdout and stderr are the log either way.
ProcessResult run_process(const ProcessSpec& spec, ProcessConversation* conversation = nullptr);

// The time the threads of the process `root` and all its descendants spent on a CPU or ready to run and
// waiting for one, by the kernel's accounting (/proc/<pid>/task/<tid>/schedstat: its first two fields), in
// seconds; nothing where the kernel does not keep it. An outside clock for the worker: its own clocks are
// in reach of the code it runs. The wait counts because the worker's own clock counts it too: on a
// machine busier than it has CPUs, a thread's wall time is mostly its time on a CPU plus that wait.
std::optional<double> process_tree_runnable_seconds(pid_t root);

// "SIGSEGV" for 11; "signal 77" for a number without a name.
std::string signal_name(int signal);

}  // namespace d2k
