#include "runner/process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

extern char** environ;

namespace d2k {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Keeps the first and the last half of the cap: the head says what started failing, the tail how it
// ended; the middle of a long log is rarely what a person needs.
class CappedOutput {
 public:
  explicit CappedOutput(std::size_t cap) : head_cap_(cap / 2), tail_cap_(cap - cap / 2) {}

  void append(const char* data, std::size_t size) {
    std::size_t to_head = std::min(size, head_cap_ - head_.size());
    head_.append(data, to_head);
    data += to_head;
    size -= to_head;
    if (size == 0) return;
    tail_.append(data, size);
    // Trimming only past twice the cap keeps appends amortized O(1).
    if (tail_.size() > 2 * tail_cap_ + 65536) trim();
  }

  std::string finish() {
    trim();
    if (cut_ == 0) return head_ + tail_;
    return fmt::format("{}\n[... {} bytes cut ...]\n{}", head_, cut_, tail_);
  }

 private:
  void trim() {
    if (tail_.size() <= tail_cap_) return;
    std::size_t excess = tail_.size() - tail_cap_;
    cut_ += excess;
    tail_.erase(0, excess);
  }

  std::size_t head_cap_;
  std::size_t tail_cap_;
  std::string head_;
  std::string tail_;
  std::size_t cut_ = 0;
};

std::vector<std::string> child_environment(const ProcessSpec& spec) {
  std::vector<std::pair<std::string, std::string>> added = spec.env;
  // A sandboxed child starts from an allowlist: API keys and tokens of the orchestrator stay here.
  if (spec.sandbox && !spec.sandbox->home.empty()) added.emplace_back("HOME", spec.sandbox->home.string());
  std::vector<std::string> env;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string_view text(*entry);
    std::string_view key = text.substr(0, text.find('='));
    if (spec.sandbox && !passes_to_sandbox(key)) continue;
    bool replaced = false;
    for (const auto& [name, value] : added) replaced = replaced || name == key;
    if (!replaced) env.emplace_back(text);
  }
  for (const auto& [name, value] : added) env.push_back(name + "=" + value);
  return env;
}

// After the group's SIGKILL: waits until none of its processes is left, so that the next child
// (the next worker on the GPU) does not start beside the remains of this one. A process stuck in
// the driver can take a while to let go of the device.
bool wait_group_gone(pid_t group, double seconds) {
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  while (::kill(-group, 0) == 0) {
    if (Clock::now() >= deadline) return false;
    ::kill(-group, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::optional<std::string> find_program(const std::string& name, const std::vector<std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& entry : env) {
    if (entry.starts_with("PATH=")) path = entry.substr(5);
  }
  std::size_t begin = 0;
  while (begin <= path.size()) {
    std::size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(begin, end - begin);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    begin = end + 1;
  }
  return std::nullopt;
}

ProcessResult failed_to_start(const ProcessSpec& spec, std::string why, Clock::time_point start) {
  ProcessResult result;
  result.end = ProcessResult::End::failed_to_start;
  result.output = std::move(why);
  result.seconds = seconds_since(start);
  result.timeout_seconds = spec.timeout_seconds;
  return result;
}

// The read end of a pipe that already holds `data`, its write end closed: the child reads the bytes,
// then end of file. Filled before the child starts, so the orchestrator neither blocks on a child that
// does not read nor takes a SIGPIPE from one that ends first. -1 and `why` when it cannot be made.
int stdin_pipe(const std::string& data, std::string& why) {
  constexpr std::size_t kMaxBytes = 1 << 20;  // the default /proc/sys/fs/pipe-max-size
  if (data.size() > kMaxBytes) {
    why = fmt::format("stdin of {} bytes: more than the {} bytes a pipe holds", data.size(), kMaxBytes);
    return -1;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    why = fmt::format("stdin pipe: {}", std::strerror(errno));
    return -1;
  }
  // A write that would block is an error, never a hang; the read end, the child's, blocks as usual.
  ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
  if (data.size() > 65536 && ::fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(data.size())) < 0)
    why = fmt::format("stdin pipe of {} bytes: {}", data.size(), std::strerror(errno));
  std::size_t written = 0;
  while (why.empty() && written < data.size()) {
    ssize_t n = ::write(fds[1], data.data() + written, data.size() - written);
    if (n > 0) {
      written += static_cast<std::size_t>(n);
    } else if (errno != EINTR) {
      why = fmt::format("stdin of {} bytes: {} after {} bytes", data.size(), std::strerror(errno), written);
    }
  }
  ::close(fds[1]);
  if (!why.empty()) {
    ::close(fds[0]);
    return -1;
  }
  return fds[0];
}

// Owns the spawn attributes so that every exit path destroys them.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

// True once the child has ended; leaves it a zombie so that its pid (our process group id) cannot be
// reused before the group is killed.
bool child_ended(pid_t pid) {
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return errno == ECHILD;
  }
  return info.si_pid == pid;
}

void reap(pid_t pid, ProcessResult& result) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    result.end = ProcessResult::End::exited;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.end = ProcessResult::End::signaled;
    result.signal = WTERMSIG(status);
  }
}

}  // namespace

std::optional<double> process_tree_runnable_seconds(pid_t root) {
  std::vector<pid_t> pending = {root};
  uint64_t nanoseconds = 0;
  bool any = false;
  while (!pending.empty()) {
    const pid_t pid = pending.back();
    pending.pop_back();
    std::error_code error;
    for (std::filesystem::directory_iterator it(fmt::format("/proc/{}/task", pid), error), end; !error && it != end;
         it.increment(error)) {
      if (std::ifstream stat(it->path() / "schedstat"); stat) {
        uint64_t on_cpu = 0, waiting = 0;
        if (stat >> on_cpu >> waiting) nanoseconds += on_cpu + waiting, any = true;
      }
      std::ifstream children(it->path() / "children");
      for (pid_t child = 0; children >> child;) pending.push_back(child);
    }
  }
  if (!any) return std::nullopt;
  return static_cast<double>(nanoseconds) * 1e-9;
}

std::string signal_name(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  if (abbrev == nullptr) return fmt::format("signal {}", signal);
  return fmt::format("SIG{}", abbrev);
}

std::string ProcessResult::describe() const {
  switch (end) {
    case End::exited:
      return fmt::format("exited with code {}", exit_code);
    case End::signaled:
      return fmt::format("killed by signal {} ({})", signal, signal_name(signal));
    case End::timed_out:
      return fmt::format("timed out after {:.1f} s", timeout_seconds);
    case End::failed_to_start:
      return fmt::format("failed to start: {}", output);
  }
  return "unknown end";
}

namespace {

// A pipe whose ends are closed when it goes out of scope unless released.
struct Pipe {
  int read = -1, write = -1;
  bool open(std::string& why) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      why = fmt::format("pipe: {}", std::strerror(errno));
      return false;
    }
    read = fds[0];
    write = fds[1];
    // A larger pipe moves hundreds of MB of tensors in fewer wake-ups (best effort: the default is 64 KiB).
    ::fcntl(write, F_SETPIPE_SZ, 1 << 20);
    return true;
  }
  void close_read() { if (read >= 0) ::close(read), read = -1; }
  void close_write() { if (write >= 0) ::close(write), write = -1; }
  ~Pipe() { close_read(), close_write(); }
};

// Reads what `fd` holds now into `sink`; false at end of file (or an error), when the fd is closed.
template <typename Sink>
bool read_ready(int& fd, Sink&& sink) {
  static thread_local std::vector<char> buffer(1 << 20);
  while (true) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n > 0) {
      sink(buffer.data(), static_cast<std::size_t>(n));
      if (static_cast<std::size_t>(n) < buffer.size()) return true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    ::close(fd);
    fd = -1;
    return false;
  }
}

// The pipes of a child's streams: stdin (a prefilled pipe, the conversation's, or /dev/null), the log on
// stdout and stderr, the conversation's channel on fd 3.
struct ChildStreams {
  int stdin_fd = -1;  // a prefilled pipe (spec.stdin_data)
  Pipe log, to_child, from_child;
};

// Spawns `program` with `argv` and `envp` in its own process group; 0 or the errno of posix_spawn.
int spawn_child(const ProcessSpec& spec, const std::string& program, std::vector<char*>& argv,
                std::vector<char*>& envp, bool conversation, ChildStreams& streams, pid_t& pid) {
  SpawnSetup setup;
  if (streams.stdin_fd >= 0) {
    posix_spawn_file_actions_adddup2(&setup.actions, streams.stdin_fd, 0);
  } else if (conversation) {
    posix_spawn_file_actions_adddup2(&setup.actions, streams.to_child.read, 0);
  } else {
    posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&setup.actions, streams.log.write, 1);
  posix_spawn_file_actions_adddup2(&setup.actions, streams.log.write, 2);
  if (conversation) posix_spawn_file_actions_adddup2(&setup.actions, streams.from_child.write, kChildChannelFd);
  int last = conversation ? kChildChannelFd : 2;
  for (const auto& [ours, theirs] : spec.inherit) {
    posix_spawn_file_actions_adddup2(&setup.actions, ours, theirs);
    last = std::max(last, theirs);
  }
  // Descriptors the orchestrator holds (other workers' pipes, the database) must not leak into
  // candidate code.
  posix_spawn_file_actions_addclosefrom_np(&setup.actions, last + 1);
  std::string cwd = spec.cwd.string();
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&setup.actions, cwd.c_str());

  // Its own process group, so that a timeout reaches every process it started; default signal
  // handling and an empty mask, whatever the orchestrator ignores or blocks.
  sigset_t empty_mask;
  sigemptyset(&empty_mask);
  sigset_t all_signals;
  sigfillset(&all_signals);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  posix_spawnattr_setsigmask(&setup.attr, &empty_mask);
  posix_spawnattr_setsigdefault(&setup.attr, &all_signals);
  posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  return ::posix_spawn(&pid, program.c_str(), &setup.actions, &setup.attr, argv.data(), envp.data());
}

// Moves bytes until the child ends or the deadline passes: the log into `output`, the channel to the
// conversation, the conversation's input to the child's stdin. True when the deadline passed.
bool pump(pid_t pid, Clock::time_point start, Clock::time_point deadline, int& log_fd, int& channel_fd, int& input_fd,
          CappedOutput& output, ProcessConversation* conversation) {
  const auto to_log = [&](const char* data, std::size_t size) { output.append(data, size); };
  const auto to_conversation = [&](const char* data, std::size_t size) {
    conversation->received(data, size, seconds_since(start));
  };
  while (true) {
    std::string_view pending;
    if (input_fd >= 0) {
      const auto asked = Clock::now();
      pending = conversation->next_input();
      deadline += Clock::now() - asked;  // the orchestrator's time, not the child's
      if (pending.empty() && !conversation->more_input()) {
        ::close(input_fd);
        input_fd = -1;
      }
    }
    pollfd entries[3];
    int count = 0;
    if (log_fd >= 0) entries[count++] = {log_fd, POLLIN, 0};
    if (channel_fd >= 0) entries[count++] = {channel_fd, POLLIN, 0};
    if (input_fd >= 0 && !pending.empty()) entries[count++] = {input_fd, POLLOUT, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    // Short slices: a grandchild may hold the pipes open after the child itself has ended.
    const int slice = static_cast<int>(std::clamp<long long>(left, 0, 100));
    if (count == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::clamp<long long>(left, 0, 5)));
    } else if (::poll(entries, static_cast<nfds_t>(count), slice) > 0) {
      for (int i = 0; i < count; ++i) {
        if (entries[i].revents == 0) continue;
        if (entries[i].fd == log_fd) {
          read_ready(log_fd, to_log);
        } else if (entries[i].fd == channel_fd) {
          read_ready(channel_fd, to_conversation);
        } else if (entries[i].fd == input_fd) {
          const ssize_t n = ::write(input_fd, pending.data(), pending.size());
          if (n > 0) {
            conversation->input_written(static_cast<std::size_t>(n));
          } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
            ::close(input_fd);  // the child closed its stdin: it has read all it wants
            input_fd = -1;
          }
        }
      }
    }
    if (child_ended(pid)) break;
    if (Clock::now() >= deadline) return true;
  }
  // What the child wrote before it ended is still in the pipes: read it before its group is killed
  // (nothing it left behind can add to them after that).
  if (channel_fd >= 0) read_ready(channel_fd, to_conversation);
  if (log_fd >= 0) read_ready(log_fd, to_log);
  return false;
}

}  // namespace

ProcessResult run_process(const ProcessSpec& spec, ProcessConversation* conversation) {
  Clock::time_point start = Clock::now();
  if (spec.argv.empty()) return failed_to_start(spec, "empty command line", start);
  if (conversation && !spec.stdin_data.empty()) return failed_to_start(spec, "stdin data and a conversation", start);

  std::vector<std::string> env = child_environment(spec);
  std::optional<std::string> program = find_program(spec.argv[0], env);
  if (!program) return failed_to_start(spec, fmt::format("{}: not found on PATH", spec.argv[0]), start);
  std::vector<std::string> command = spec.argv;
  const bool isolated = spec.sandbox && spec.sandbox->mode != SandboxMode::off;
  if (isolated) {
    // The program found here, so that the sandbox runs what an unsandboxed run would.
    command[0] = *program;
    command = sandboxed_argv(*spec.sandbox, command, spec.cwd);
    program = command[0];
  }
  std::vector<char*> argv;
  for (const auto& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& entry : env) envp.push_back(const_cast<char*>(entry.c_str()));
  envp.push_back(nullptr);

  std::string why;
  ChildStreams streams;
  if (!spec.stdin_data.empty() && (streams.stdin_fd = stdin_pipe(spec.stdin_data, why)) < 0)
    return failed_to_start(spec, why, start);
  if (!streams.log.open(why) || (conversation && (!streams.to_child.open(why) || !streams.from_child.open(why)))) {
    if (streams.stdin_fd >= 0) ::close(streams.stdin_fd);
    return failed_to_start(spec, why, start);
  }
  // The descriptors the child inherits, first moved above every number the child's streams take: a
  // source numbered 3 would otherwise be overwritten by the channel's dup2 onto 3 before its own dup2.
  ProcessSpec moved = spec;
  std::vector<int> temporary;
  for (auto& [ours, theirs] : moved.inherit) {
    ours = ::fcntl(ours, F_DUPFD_CLOEXEC, 64);
    if (ours < 0) {
      for (int fd : temporary) ::close(fd);
      return failed_to_start(spec, fmt::format("fcntl(F_DUPFD) of an inherited descriptor: {}", std::strerror(errno)), start);
    }
    temporary.push_back(ours);
  }
  pid_t pid = -1;
  const int spawn_error = spawn_child(moved, *program, argv, envp, conversation != nullptr, streams, pid);
  for (int fd : temporary) ::close(fd);
  streams.log.close_write();
  streams.to_child.close_read();
  streams.from_child.close_write();
  if (streams.stdin_fd >= 0) ::close(streams.stdin_fd);
  if (spawn_error != 0) {
    std::string where = spec.cwd.empty() ? "" : fmt::format(" (in {})", spec.cwd.string());
    return failed_to_start(spec, fmt::format("{}: {}{}", *program, std::strerror(spawn_error), where), start);
  }

  // A child that stops reading its stdin must not take the orchestrator down with SIGPIPE: the write
  // fails with EPIPE instead. For the whole process, once (children get default handlers back).
  static const bool sigpipe_ignored = [] { return ::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();
  (void)sigpipe_ignored;
  if (conversation) conversation->started(pid);
  int log_fd = streams.log.read, channel_fd = streams.from_child.read, input_fd = streams.to_child.write;
  streams.log.read = streams.from_child.read = streams.to_child.write = -1;  // closed here, as they end
  for (int fd : {log_fd, channel_fd, input_fd})
    if (fd >= 0) ::fcntl(fd, F_SETFL, O_NONBLOCK);
  ProcessResult result;
  result.timeout_seconds = spec.timeout_seconds;
  CappedOutput output(spec.output_cap);
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(spec.timeout_seconds));
  const bool timed_out = pump(pid, start, deadline, log_fd, channel_fd, input_fd, output, conversation);

  // Whatever the child left behind in its group goes with it.
  ::kill(-pid, SIGKILL);
  reap(pid, result);
  const bool gone = wait_group_gone(pid, 30);
  for (int fd : {log_fd, channel_fd, input_fd})
    if (fd >= 0) ::close(fd);
  if (!gone) {
    const std::string note = "\n[d2k: processes of this command outlived SIGKILL by 30 s]\n";
    output.append(note.data(), note.size());
  }
  if (timed_out) result.end = ProcessResult::End::timed_out;
  result.output = output.finish();
  if (spec.sandbox && !isolated) result.output = "d2k: sandbox off: this command ran without isolation\n" + result.output;
  result.seconds = seconds_since(start);
  return result;
}

}  // namespace d2k
