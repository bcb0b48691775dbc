// d2k-sandbox [options] -- COMMAND [ARGS...]: runs COMMAND confined (docs/sandbox.md).
// d2k-sandbox --probe [--gpu]: says what this machine's kernel allows and what a run would get.
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "sandbox/launch.hpp"
#include "sandbox/restrict.hpp"

namespace {

using d2k::sandbox::Policy;

int usage(const char* why) {
  std::fprintf(stderr,
               "d2k-sandbox: %s\n"
               "usage: d2k-sandbox [--strict|--best-effort] [--system] [--ro PATH]... [--rw PATH]... [--gpu]\n"
               "                   [--home DIR] [--cwd DIR] [--cpu-seconds N] [--file-bytes N] [--processes N]\n"
               "                   [--memory-bytes N] [--without-namespaces] [--without-user-namespace]\n"
               "                   -- COMMAND [ARGS...]\n"
               "       d2k-sandbox --probe [--gpu]\n",
               why);
  return 2;
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "(absent)";
  return line;
}

// Runs `policy` in a child and returns its wait status.
int trial(const Policy& policy) {
  std::fflush(stdout);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(STDOUT_FILENO, STDERR_FILENO);
    d2k::sandbox::launch(policy);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

int probe(bool gpu) {
  utsname name{};
  ::uname(&name);
  std::printf("kernel: %s %s\n", name.release, name.machine);
  std::printf("euid: %d\n", static_cast<int>(::geteuid()));
  std::printf("landlock abi: %d\n", d2k::sandbox::landlock_abi());
  std::printf("lsm: %s\n", first_line("/sys/kernel/security/lsm").c_str());
  std::printf("kernel.apparmor_restrict_unprivileged_userns: %s\n",
              first_line("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").c_str());
  std::printf("kernel.unprivileged_userns_clone: %s\n", first_line("/proc/sys/kernel/unprivileged_userns_clone").c_str());
  std::printf("user.max_user_namespaces: %s\n", first_line("/proc/sys/user/max_user_namespaces").c_str());
  struct stat info {};
  if (::stat("/dev/nvidiactl", &info) == 0) {
    // The sandboxed worker runs as nobody: the device nodes must be open to others (0666).
    std::printf("/dev/nvidiactl: present, mode %o, uid %d, gid %d\n", info.st_mode & 07777, static_cast<int>(info.st_uid),
                static_cast<int>(info.st_gid));
  } else {
    std::printf("/dev/nvidiactl: absent\n");
  }

  char workspace[] = "/tmp/d2k-sandbox-probe-XXXXXX";
  if (::mkdtemp(workspace) == nullptr) return 1;
  Policy policy;
  policy.read = d2k::sandbox::system_read_paths();
  policy.write = {workspace};
  policy.home = workspace;
  policy.gpu = gpu;
  if (gpu) policy.read.push_back("/sys");
  policy.cpu_seconds = 10;
  policy.file_bytes = 1 << 20;
  policy.processes = 64;
  // What the command sees: /etc/passwd must be gone, / read-only, the workspace writable.
  policy.command = {"sh", "-c",
                    "if cat /etc/passwd >/dev/null 2>&1; then echo 'check: /etc/passwd READABLE'; else echo 'check: /etc/passwd hidden'; fi; "
                    "if touch /d2k-probe 2>/dev/null; then echo 'check: / WRITABLE'; else echo 'check: / read-only'; fi; "
                    "if touch ./ok 2>/dev/null; then echo 'check: workspace writable'; else echo 'check: workspace NOT writable'; fi; "
                    "ls /dev | grep -c nvidia | sed 's/^/check: nvidia device nodes visible: /'; "
                    "if [ -e /dev/nvidiactl ]; then if : <> /dev/nvidiactl; then echo 'check: /dev/nvidiactl opens read-write'; "
                    "else echo 'check: /dev/nvidiactl DOES NOT OPEN (the CUDA driver will fail in the sandbox)'; fi; fi"};
  policy.strict = false;
  std::printf("best-effort run:\n");
  int status = trial(policy);
  std::printf("best-effort exit: %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  std::printf("fallback run (Landlock and seccomp, no namespaces):\n");
  Policy fallback = policy;
  fallback.namespaces = false;
  status = trial(fallback);
  std::printf("fallback exit: %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  policy.strict = true;
  policy.command = {"true"};
  std::printf("strict run:\n");
  status = trial(policy);
  bool strict_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::printf("strict: %s\n", strict_ok ? "ok (the default --sandbox strict works here)" : "FAILS (see the line above)");
  std::string cleanup = std::string("rm -rf ") + workspace;
  (void)!std::system(cleanup.c_str());
  return strict_ok ? 0 : 1;
}

bool parse_long(const char* text, long& value) {
  char* end = nullptr;
  value = std::strtol(text, &end, 10);
  return end != text && *end == '\0' && value >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  Policy policy;
  bool probe_mode = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--") {
      ++i;
      break;
    } else if (arg == "--probe") {
      probe_mode = true;
    } else if (arg == "--strict") {
      policy.strict = true;
    } else if (arg == "--best-effort") {
      policy.strict = false;
    } else if (arg == "--without-namespaces") {
      policy.namespaces = false;
    } else if (arg == "--without-user-namespace") {
      policy.user_namespace = false;
    } else if (arg == "--gpu") {
      policy.gpu = true;
    } else if (arg == "--system") {
      for (const auto& path : d2k::sandbox::system_read_paths()) policy.read.push_back(path);
    } else if (arg == "--ro" || arg == "--rw" || arg == "--home" || arg == "--cwd") {
      const char* path = value();
      if (path == nullptr || path[0] != '/') return usage((arg + " needs an absolute path").c_str());
      if (arg == "--ro") policy.read.push_back(path);
      if (arg == "--rw") policy.write.push_back(path);
      if (arg == "--home") policy.home = path;
      if (arg == "--cwd") policy.cwd = path;
    } else if (arg == "--cpu-seconds" || arg == "--file-bytes" || arg == "--processes" || arg == "--memory-bytes") {
      const char* text = value();
      long number = 0;
      if (text == nullptr || !parse_long(text, number)) return usage((arg + " needs a number").c_str());
      if (arg == "--cpu-seconds") policy.cpu_seconds = number;
      if (arg == "--file-bytes") policy.file_bytes = number;
      if (arg == "--processes") policy.processes = number;
      if (arg == "--memory-bytes") policy.memory_bytes = number;
    } else {
      return usage(("unknown option " + arg).c_str());
    }
  }
  if (probe_mode) return probe(policy.gpu);
  for (; i < argc; ++i) policy.command.push_back(argv[i]);
  if (policy.command.empty()) return usage("no command");
  d2k::sandbox::launch(policy);
}
