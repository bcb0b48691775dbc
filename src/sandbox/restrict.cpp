#include "sandbox/restrict.hpp"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <dirent.h>
#include <string>
#include <vector>

namespace d2k::sandbox {
namespace {

// Landlock's user API, spelled out here: the build machine's kernel headers (Debian 12: Linux 6.1)
// predate the network and scope rules that newer kernels offer.
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};
struct PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

constexpr uint32_t kCreateRulesetVersion = 1;
constexpr int kRulePathBeneath = 1;
constexpr uint64_t kExecute = 1ull << 0, kWriteFile = 1ull << 1, kReadFile = 1ull << 2, kReadDir = 1ull << 3;
constexpr uint64_t kTruncate = 1ull << 14, kIoctlDev = 1ull << 15;
constexpr uint64_t kNetBindTcp = 1ull << 0, kNetConnectTcp = 1ull << 1;
constexpr uint64_t kScopeAbstractUnix = 1ull << 0, kScopeSignal = 1ull << 1;

uint64_t handled_fs(int abi) {
  uint64_t all = (1ull << 13) - 1;  // ABI 1: execute .. make_sym
  if (abi >= 2) all |= 1ull << 13;  // refer
  if (abi >= 3) all |= kTruncate;
  if (abi >= 5) all |= kIoctlDev;
  return all;
}

uint64_t file_rights(int abi) {
  uint64_t rights = kExecute | kWriteFile | kReadFile;
  if (abi >= 3) rights |= kTruncate;
  if (abi >= 5) rights |= kIoctlDev;
  return rights;
}

std::string errno_text() { return std::strerror(errno); }

// Adds `path` with `rights`, narrowed to what a file may carry when it is not a folder. Missing
// paths are skipped: a policy names /lib64 whether or not this machine has one.
bool add_path(int ruleset, const std::string& path, uint64_t rights, int abi, Applied& applied) {
  int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  struct stat info {};
  ::fstat(fd, &info);
  PathBeneathAttr rule{};
  rule.allowed_access = S_ISDIR(info.st_mode) ? rights & handled_fs(abi) : rights & file_rights(abi);
  rule.parent_fd = fd;
  bool ok = ::syscall(SYS_landlock_add_rule, ruleset, kRulePathBeneath, &rule, 0) == 0;
  if (!ok) applied.missing.push_back("landlock rule for " + path + ": " + errno_text());
  ::close(fd);
  return ok;
}

// Processes the uid runs now: outside a user namespace RLIMIT_NPROC counts all of them, so the limit
// is set that far above the present count.
long processes_of_uid(uid_t uid) {
  long count = 0;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return 0;
  while (dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    struct stat info {};
    std::string task = std::string("/proc/") + entry->d_name + "/task";
    if (::stat((std::string("/proc/") + entry->d_name).c_str(), &info) != 0 || info.st_uid != uid) continue;
    DIR* threads = ::opendir(task.c_str());
    if (threads == nullptr) continue;
    while (dirent* thread = ::readdir(threads)) count += thread->d_name[0] != '.';
    ::closedir(threads);
  }
  ::closedir(proc);
  return count;
}

void set_limit(int resource, long value, long hard_extra, const std::string& what, Applied& applied) {
  if (value <= 0) return;
  rlimit limit{static_cast<rlim_t>(value), static_cast<rlim_t>(value + hard_extra)};
  if (::setrlimit(resource, &limit) == 0) {
    applied.limits.push_back(what);
  } else {
    applied.missing.push_back("limit " + what + ": " + errno_text());
  }
}

std::string bytes_text(long bytes) {
  if (bytes % (1l << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes % (1l << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " B";
}

}  // namespace

int landlock_abi() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  return abi < 0 ? 0 : static_cast<int>(abi);
}

void apply_limits(const Policy& policy, bool own_user_namespace, Applied& applied) {
  rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  // SIGXCPU at the soft limit, SIGKILL a few seconds later if it is ignored.
  set_limit(RLIMIT_CPU, policy.cpu_seconds, 5, "cpu " + std::to_string(policy.cpu_seconds) + " s", applied);
  set_limit(RLIMIT_FSIZE, policy.file_bytes, 0, "file " + bytes_text(policy.file_bytes), applied);
  set_limit(RLIMIT_AS, policy.memory_bytes, 0, "memory " + bytes_text(policy.memory_bytes), applied);
  if (policy.processes <= 0) return;
  // The kernel exempts the real root user from RLIMIT_NPROC, and counts it per user (per user
  // namespace since Linux 5.14): inside our own user namespace the count is this sandbox's alone.
  if (::geteuid() == 0 && !own_user_namespace) {
    applied.missing.push_back("processes: root outside a user namespace is exempt from RLIMIT_NPROC");
    return;
  }
  long base = own_user_namespace ? 0 : processes_of_uid(::geteuid());
  std::size_t before = applied.limits.size();
  set_limit(RLIMIT_NPROC, base + policy.processes, 0, "processes " + std::to_string(policy.processes), applied);
  applied.process_limit = applied.limits.size() > before;
}

void apply_landlock(const Policy& policy, bool filesystem, Applied& applied) {
  int abi = landlock_abi();
  applied.landlock_abi = abi;
  if (abi <= 0) {
    applied.missing.push_back("landlock: not offered by this kernel");
    return;
  }
  RulesetAttr attr{};
  std::size_t size = sizeof(uint64_t);
  if (filesystem) attr.handled_access_fs = handled_fs(abi);
  if (abi >= 4) {
    attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
    size = 2 * sizeof(uint64_t);
  }
  if (abi >= 6) {
    // Abstract unix sockets and signals stay inside the sandbox: no reaching the host's D-Bus or
    // signalling the orchestrator.
    attr.scoped = kScopeAbstractUnix | kScopeSignal;
    size = sizeof(RulesetAttr);
  }
  if (attr.handled_access_fs == 0 && attr.handled_access_net == 0 && attr.scoped == 0) return;
  int ruleset = static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, size, 0));
  if (ruleset < 0) {
    applied.missing.push_back("landlock: " + errno_text());
    return;
  }
  bool ok = true;
  if (filesystem) {
    const uint64_t read = kExecute | kReadFile | kReadDir;
    const uint64_t write = handled_fs(abi);
    for (const auto& path : policy.read) ok &= add_path(ruleset, path, read, abi, applied);
    for (const auto& path : policy.write) ok &= add_path(ruleset, path, write, abi, applied);
    for (const char* dev : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"})
      ok &= add_path(ruleset, dev, kReadFile | kWriteFile, abi, applied);
    ok &= add_path(ruleset, "/proc", kReadFile | kReadDir, abi, applied);
    ok &= add_path(ruleset, "/dev", kReadDir, abi, applied);  // the names only: the driver looks for its nodes
    if (policy.gpu) {
      ok &= add_path(ruleset, "/sys", kReadFile | kReadDir, abi, applied);
      if (DIR* dev = ::opendir("/dev")) {
        while (dirent* entry = ::readdir(dev)) {
          if (std::strncmp(entry->d_name, "nvidia", 6) != 0) continue;
          ok &= add_path(ruleset, std::string("/dev/") + entry->d_name,
                         kReadFile | kWriteFile | kReadDir | kIoctlDev, abi, applied);
        }
        ::closedir(dev);
      }
    }
  }
  if (ok && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
      ::syscall(SYS_landlock_restrict_self, ruleset, 0) == 0) {
    applied.landlock_fs = filesystem;
    applied.landlock_net = abi >= 4;
  } else {
    applied.missing.push_back("landlock: restrict_self: " + errno_text());
  }
  ::close(ruleset);
}

void drop_privileges(Applied& applied) {
  for (int cap = 0; cap <= 63; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno == EINVAL) break;
  }
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capset, &header, data) != 0) applied.missing.push_back("capabilities: " + errno_text());
}

void apply_seccomp(Applied& applied) {
#if defined(__x86_64__)
  constexpr uint32_t kDeny = SECCOMP_RET_ERRNO | EPERM;
  constexpr uint32_t kNoFamily = SECCOMP_RET_ERRNO | EAFNOSUPPORT;
  constexpr uint32_t kNamespaces = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                                   CLONE_NEWUTS | CLONE_NEWCGROUP;
  const int denied[] = {SYS_ptrace,        SYS_process_vm_readv, SYS_process_vm_writev, SYS_mount,
                        SYS_umount2,       SYS_pivot_root,       SYS_chroot,            SYS_unshare,
                        SYS_setns,         SYS_keyctl,           SYS_add_key,           SYS_request_key,
                        SYS_bpf,           SYS_kexec_load,       SYS_init_module,       SYS_finit_module,
                        SYS_delete_module, SYS_open_by_handle_at, SYS_mount_setattr,    SYS_move_mount,
                        SYS_open_tree,     SYS_fsopen,           SYS_fsmount,           SYS_fspick,
                        SYS_swapon,        SYS_swapoff,          SYS_reboot,            SYS_userfaultfd,
                        // leaving the process group would escape the kill at a timeout
                        SYS_setsid,        SYS_setpgid};
  std::vector<sock_filter> program = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, kDeny),  // i386 or x32 entry points would slip past the numbers below
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, kDeny),
  };
  for (int nr : denied) {
    program.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1));
    program.push_back(BPF_STMT(BPF_RET | BPF_K, kDeny));
  }
  // clone3 passes its flags in memory the filter cannot read: ENOSYS makes glibc fall back to clone.
  program.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1));
  program.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));
  // clone: no new namespaces.
  program.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4));
  program.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
  program.push_back(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, kNamespaces, 0, 1));
  program.push_back(BPF_STMT(BPF_RET | BPF_K, kDeny));
  program.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  // socket: local families only; the network is the host's.
  program.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 4));
  program.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
  program.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 2, 0));
  program.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 1, 0));
  program.push_back(BPF_STMT(BPF_RET | BPF_K, kNoFamily));
  program.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  sock_fprog fprog{static_cast<unsigned short>(program.size()), program.data()};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) {
    applied.missing.push_back("seccomp: " + errno_text());
    return;
  }
  applied.seccomp = true;
#else
  applied.missing.push_back("seccomp: the filter is written for x86-64 only");
#endif
}

}  // namespace d2k::sandbox
