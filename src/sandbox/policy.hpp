// What d2k-sandbox confines a command to, and what it managed to apply. The launcher is a separate,
// single-threaded executable: it can fork and set up namespaces safely, which the multi-threaded
// orchestrator (torch, CUDA) cannot; docs/sandbox.md says why each mechanism is there.
#pragma once

#include <string>
#include <vector>

namespace d2k::sandbox {

struct Policy {
  bool strict = true;              // a missing isolation property is an error, not a warning
  std::vector<std::string> read;   // absolute paths the command may read (and execute)
  std::vector<std::string> write;  // absolute paths it may also write; the workspace
  bool gpu = false;                // the NVIDIA device nodes, /sys and /proc for the CUDA driver
  std::string home;                // HOME and the working folder; one of `write`
  std::string cwd;                 // empty: home
  long cpu_seconds = 0;            // 0: no limit (each limit)
  long file_bytes = 0;
  long processes = 0;
  long memory_bytes = 0;           // address space; never for CUDA processes
  bool namespaces = true;          // false: Landlock and seccomp only (a test seam for that path)
  bool user_namespace = true;      // false: namespaces without a user namespace (root; a test seam)
  std::vector<std::string> command;
};

// What a compiler or the CUDA driver reads on any machine: /usr (with /usr/local/cuda), the merged-usr
// links, the dynamic loader's configuration, the alternatives links to the compilers. Nothing of
// /etc beyond that: no passwd, no keys.
std::vector<std::string> system_read_paths();

// What each layer did, for the one line the launcher prints and for the strict check.
struct Applied {
  std::vector<std::string> namespaces;  // "user", "mount", "pid", "net", "ipc", "uts"
  bool filesystem_view = false;         // a new root holding only the allowed paths
  bool landlock_fs = false;
  int landlock_abi = 0;
  bool landlock_net = false;
  bool seccomp = false;
  bool process_limit = false;           // RLIMIT_NPROC is counted for this sandbox alone
  bool private_proc = false;            // /proc shows the sandbox's processes only
  std::vector<std::string> limits;      // "cpu 310 s", ...
  std::vector<std::string> missing;     // why a layer did not apply

  bool has(const std::string& ns) const;
  bool network_isolated() const { return has("net") || seccomp; }
  bool filesystem_isolated() const { return filesystem_view || landlock_fs; }
  // Empty when the strict properties hold: no network, no reads or writes outside the policy, a
  // process limit.
  std::vector<std::string> strict_failures(const Policy& policy) const;
  std::string summary() const;
};

}  // namespace d2k::sandbox
