#include "sandbox/launch.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sandbox/restrict.hpp"

extern char** environ;

namespace d2k::sandbox {
namespace {

// The uid the sandbox's root maps to when the launcher is root: files of the real root are then
// not its own, and RLIMIT_NPROC applies (the kernel exempts real root from it).
constexpr uid_t kNobody = 65534;

// Why a setup step failed; the child that hits it tells the launcher through a pipe.
struct SetupError {
  std::string what;
};

std::string errno_text() { return std::strerror(errno); }

[[noreturn]] void fail_setup(const std::string& what) { throw SetupError{what + ": " + errno_text()}; }

void write_text(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) fail_setup("open " + path);
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!ok) fail_setup("write " + path);
}

void make_dirs(const std::string& path) {
  for (std::size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    std::string prefix = path.substr(0, at);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) fail_setup("mkdir " + prefix);
  }
}

void make_file(const std::string& path) {
  make_dirs(path.substr(0, path.rfind('/')));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail_setup("create " + path);
  ::close(fd);
}

// mount_setattr(2), called by number: glibc's <sys/mount.h> and <linux/mount.h> clash on older
// systems. Falls back to a bind remount (one mount, not its submounts) before Linux 5.12.
struct MountAttr {
  uint64_t attr_set, attr_clr, propagation, userns_fd;
};
constexpr uint64_t kAttrRdonly = 0x1, kAttrNosuid = 0x2, kAttrNodev = 0x4;
constexpr unsigned kAtRecursive = 0x8000;

void restrict_mount(const std::string& path, bool read_only, bool keep_devices, bool recursive) {
  MountAttr attr{};
  attr.attr_set = kAttrNosuid | (read_only ? kAttrRdonly : 0) | (keep_devices ? 0 : kAttrNodev);
  if (::syscall(SYS_mount_setattr, AT_FDCWD, path.c_str(), recursive ? kAtRecursive : 0, &attr, sizeof attr) == 0)
    return;
  if (errno != ENOSYS) fail_setup("mount_setattr " + path);
  // A remount in a user namespace must keep the flags it inherited, or the kernel refuses it.
  struct statvfs info {};
  ::statvfs(path.c_str(), &info);
  unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOSUID | (read_only ? MS_RDONLY : 0) | (keep_devices ? 0 : MS_NODEV);
  if (info.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (info.f_flag & ST_NODEV) flags |= MS_NODEV;
  if (info.f_flag & ST_RDONLY) flags |= MS_RDONLY;
  if (::mount(nullptr, path.c_str(), nullptr, flags, nullptr) != 0) fail_setup("remount " + path);
}

// One allowed path: where it really is on the host, and the first symlink on the way to it that the
// new root must repeat so that the path as given still resolves.
struct Bind {
  std::string real;
  bool dir = false;
  bool writable = false;
  std::string link, link_target;
};

std::vector<Bind> plan_binds(const Policy& policy) {
  std::vector<Bind> binds;
  auto add = [&](const std::string& path, bool writable) {
    char real[PATH_MAX];
    if (::realpath(path.c_str(), real) == nullptr) return;  // absent on this machine
    struct stat info {};
    if (::stat(real, &info) != 0) return;
    Bind bind{real, S_ISDIR(info.st_mode), writable, {}, {}};
    for (std::size_t at = 1; at <= path.size(); ++at) {
      if (at != path.size() && path[at] != '/') continue;
      std::string prefix = path.substr(0, at);
      struct stat link {};
      if (::lstat(prefix.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = ::readlink(prefix.c_str(), target, sizeof target - 1);
        if (n > 0) bind.link = prefix, bind.link_target.assign(target, static_cast<std::size_t>(n));
        break;
      }
    }
    binds.push_back(bind);
  };
  for (const auto& path : policy.read) add(path, false);
  for (const auto& path : policy.write) add(path, true);
  // Parents before children, so that a writable workspace inside a read-only tree stays writable.
  std::stable_sort(binds.begin(), binds.end(), [](const Bind& a, const Bind& b) { return a.real < b.real; });
  return binds;
}

void bind_into(const std::string& source, const std::string& target, bool dir) {
  if (dir) make_dirs(target);
  else make_file(target);
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
    fail_setup("bind " + source + " on " + target);
}

// The new root: a tmpfs holding only the allowed paths (read-only but the workspace), a minimal
// /dev and a private /proc. Runs in the child that is pid 1 of the new pid namespace.
void build_root(const Policy& policy, const std::vector<Bind>& binds, Applied& applied) {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail_setup("make / private");
  // Staging on /tmp, as bubblewrap does: after the first pivot the old root, /tmp included, is
  // reachable under /oldroot, so allowed paths under /tmp are not hidden by the staging tmpfs.
  if (::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0) fail_setup("mount tmpfs on /tmp");
  if (::chdir("/tmp") != 0) fail_setup("chdir /tmp");
  make_dirs("/tmp/oldroot");
  make_dirs("/tmp/newroot");
  if (::syscall(SYS_pivot_root, "/tmp", "/tmp/oldroot") != 0) fail_setup("pivot_root");
  if (::chdir("/") != 0) fail_setup("chdir /");
  if (::mount("tmpfs", "/newroot", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m") != 0)
    fail_setup("mount tmpfs on /newroot");

  for (const auto& bind : binds) {
    std::string target = "/newroot" + bind.real;
    bind_into("/oldroot" + bind.real, target, bind.dir);
    restrict_mount(target, !bind.writable, false, true);
    if (!bind.link.empty()) {
      std::string link = "/newroot" + bind.link;
      make_dirs(link.substr(0, link.rfind('/')));
      if (::symlink(bind.link_target.c_str(), link.c_str()) != 0 && errno != EEXIST) fail_setup("symlink " + link);
    }
  }

  make_dirs("/newroot/dev");
  if (::mount("tmpfs", "/newroot/dev", "tmpfs", MS_NOSUID, "mode=0755,size=64k") != 0) fail_setup("mount /dev");
  std::vector<std::string> devices = {"null", "zero", "full", "random", "urandom"};
  if (policy.gpu) {
    if (DIR* dev = ::opendir("/oldroot/dev")) {
      while (dirent* entry = ::readdir(dev))
        if (std::strncmp(entry->d_name, "nvidia", 6) == 0) devices.push_back(entry->d_name);
      ::closedir(dev);
    }
  }
  for (const auto& name : devices) {
    struct stat info {};
    std::string source = "/oldroot/dev/" + name;
    if (::stat(source.c_str(), &info) != 0) continue;
    bind_into(source, "/newroot/dev/" + name, S_ISDIR(info.st_mode));
  }
  make_dirs("/newroot/dev/shm");
  if (::mount("tmpfs", "/newroot/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=1g") != 0)
    fail_setup("mount /dev/shm");
  for (const auto& [link, target] : std::vector<std::pair<std::string, std::string>>{
           {"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"}}) {
    // The /dev conveniences a program may expect; /dev is a fresh tmpfs, so a failure here is not expected.
    if (::symlink(target.c_str(), ("/newroot/dev/" + link).c_str()) != 0 && errno != EEXIST)
      fail_setup("symlink /dev/" + link);
  }
  restrict_mount("/newroot/dev", true, true, false);

  make_dirs("/newroot/proc");
  if (::mount("proc", "/newroot/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0) {
    applied.private_proc = true;
    // Kernel knobs stay read-only even for a root that kept its uid.
    for (const char* knob : {"/newroot/proc/sys", "/newroot/proc/sysrq-trigger"}) {
      if (::mount(knob, knob, nullptr, MS_BIND | MS_REC, nullptr) == 0) restrict_mount(knob, true, false, true);
    }
  } else {
    applied.missing.push_back("private /proc: " + errno_text() + " (the host's /proc is bound read-only)");
    bind_into("/oldroot/proc", "/newroot/proc", true);
    restrict_mount("/newroot/proc", true, false, true);
  }


  if (::umount2("/oldroot", MNT_DETACH) != 0) fail_setup("detach the old root");
  if (::chdir("/newroot") != 0) fail_setup("chdir /newroot");
  if (::syscall(SYS_pivot_root, ".", ".") != 0) fail_setup("pivot_root into the new root");
  if (::umount2(".", MNT_DETACH) != 0) fail_setup("detach the staging root");
  if (::chdir("/") != 0) fail_setup("chdir /");
  restrict_mount("/", true, false, false);
  applied.filesystem_view = true;
}

// No /tmp of its own: a write that lands anywhere but the workspace would look like an escape to the
// code that made it, and temporary files belong to the workspace anyway.
void set_environment(const Policy& policy) {
  if (policy.home.empty()) return;
  ::setenv("HOME", policy.home.c_str(), 1);
  ::setenv("TMPDIR", policy.home.c_str(), 1);
}

// Outside a user namespace, a root launcher hands the command to nobody: real root reads every
// root-owned file whatever its mode, and the kernel exempts it from RLIMIT_NPROC.
void become_nobody(Applied& applied) {
  for (int cap = 0; cap <= 63; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno == EINVAL) break;
  }
  if (::setgroups(0, nullptr) != 0 || ::setresgid(kNobody, kNobody, kNobody) != 0 ||
      ::setresuid(kNobody, kNobody, kNobody) != 0) {
    applied.missing.push_back("switching to uid nobody: " + errno_text());
  }
}

// The confined process: limits, Landlock, capabilities, seccomp, then the command.
[[noreturn]] void run_command(const Policy& policy, Applied& applied, bool own_user_namespace) {
  if (::geteuid() == 0 && !own_user_namespace) become_nobody(applied);
  apply_limits(policy, own_user_namespace, applied);
  // Landlock on top of the new root where it exists (its network and scope rules still add), in
  // place of it where it does not.
  apply_landlock(policy, !applied.filesystem_view, applied);
  drop_privileges(applied);
  apply_seccomp(applied);
  set_environment(policy);
  std::string cwd = policy.cwd.empty() ? policy.home : policy.cwd;
  if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) {
    std::fprintf(stderr, "d2k-sandbox: cannot enter %s: %s\n", cwd.c_str(), errno_text().c_str());
    std::_Exit(kSetupFailed);
  }
  std::fprintf(stderr, "d2k-sandbox: %s\n", applied.summary().c_str());
  if (policy.strict) {
    auto failures = applied.strict_failures(policy);
    if (!failures.empty()) {
      std::string text;
      for (const auto& failure : failures) text += (text.empty() ? "" : "; ") + failure;
      std::fprintf(stderr, "d2k-sandbox: strict: %s (use --sandbox best-effort to run anyway)\n", text.c_str());
      std::_Exit(kSetupFailed);
    }
  }
  std::fflush(stderr);
  std::vector<char*> argv;
  for (const auto& arg : policy.command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "d2k-sandbox: %s: %s\n", argv[0], errno_text().c_str());
  std::_Exit(127);
}

// Ends this process the way `status` says its child ended: the caller sees the command's own exit
// code or signal, not the launcher's.
[[noreturn]] void end_like(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
    ::kill(::getpid(), sig);
    std::_Exit(128 + sig);
  }
  std::_Exit(WIFEXITED(status) ? WEXITSTATUS(status) : kSetupFailed);
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return kSetupFailed << 8;
  }
  return status;
}

struct Attempt {
  int flags;
  std::vector<std::string> names;
};

// The child of clone(): pid 1 of the new pid namespace. Builds the root, starts the command and
// reaps whatever it leaves; tells the launcher how the command ended through `report`.
[[noreturn]] void init_main(const Policy& policy, const std::vector<Bind>& binds, Applied applied, int go, int report,
                            bool user_namespace) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the launcher killed at a timeout takes the namespace with it
  char byte = 0;
  if (::read(go, &byte, 1) != 1 || byte != 'g') std::_Exit(kSetupFailed);
  ::close(go);
  try {
    if (user_namespace) {
      // Become the namespace's root (the mapped uid): until then the real uid is unmapped in it, and
      // the files it creates could not be owned by anyone.
      ::setgroups(0, nullptr);  // refused after "deny" (unprivileged launcher): no groups to drop then
      if (::setresgid(0, 0, 0) != 0) fail_setup("setresgid in the user namespace");
      if (::setresuid(0, 0, 0) != 0) fail_setup("setresuid in the user namespace");
    }
    if (std::find(applied.namespaces.begin(), applied.namespaces.end(), "mount") != applied.namespaces.end())
      build_root(policy, binds, applied);
  } catch (const SetupError& error) {
    std::string text = "E" + error.what;
    (void)!::write(report, text.data(), text.size());
    std::_Exit(kSetupFailed);
  }
  // Cosmetic (the host's name stays hidden either way, in a uts namespace of its own): a failure is ignored.
  if (applied.has("uts")) (void)!::sethostname("d2k-sandbox", 11);
  pid_t command = ::fork();
  if (command < 0) std::_Exit(kSetupFailed);
  if (command == 0) {
    ::close(report);
    run_command(policy, applied, user_namespace);
  }
  // As pid 1, reap every orphan until the command itself ends; the rest die with the namespace.
  int status = 0;
  while (true) {
    pid_t done = ::waitpid(-1, &status, 0);
    if (done == command) break;
    if (done < 0 && errno != EINTR) break;
  }
  std::string text = "S" + std::to_string(status);
  (void)!::write(report, text.data(), text.size());
  std::_Exit(0);
}

}  // namespace

[[noreturn]] void launch(const Policy& policy) {
  const std::vector<Bind> binds = plan_binds(policy);
  const bool root = ::geteuid() == 0;
  Applied applied;
  std::vector<Attempt> attempts;
  if (!policy.namespaces) applied.missing.push_back("namespaces: not asked for");
  const int rest = CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
  attempts.push_back({CLONE_NEWUSER | CLONE_NEWNS | rest, {"user", "mount", "pid", "net", "ipc", "uts"}});
  if (root) attempts.push_back({CLONE_NEWNS | rest, {"mount", "pid", "net", "ipc", "uts"}});
  // Without a mount namespace Landlock guards the files; the rest still isolates.
  attempts.push_back({CLONE_NEWUSER | rest, {"user", "pid", "net", "ipc", "uts"}});
  if (root) attempts.push_back({rest, {"pid", "net", "ipc", "uts"}});

  std::vector<std::pair<uid_t, gid_t>> owners;
  for (const auto& path : policy.write) {
    struct stat info {};
    ::stat(path.c_str(), &info);
    owners.emplace_back(info.st_uid, info.st_gid);
  }
  for (const auto& attempt : attempts) {
    if (!policy.namespaces) break;
    if (!policy.user_namespace && (attempt.flags & CLONE_NEWUSER)) continue;
    const bool user = attempt.flags & CLONE_NEWUSER;
    if (root) {
      // The workspace must belong to the uid the sandbox runs as: nobody, mapped to the root of a
      // user namespace or switched to without one.
      for (std::size_t k = 0; k < policy.write.size(); ++k) {
        if (::chown(policy.write[k].c_str(), kNobody, kNobody) != 0 && errno != ENOENT)
          applied.missing.push_back("chown " + policy.write[k] + ": " + errno_text());
      }
    }
    int go[2], report[2];
    if (::pipe2(go, O_CLOEXEC) != 0 || ::pipe2(report, O_CLOEXEC) != 0) break;
    Applied trial = applied;
    trial.namespaces = attempt.names;
    std::fflush(stderr);
    long pid = ::syscall(SYS_clone, attempt.flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
    if (pid == 0) {
      ::close(go[1]);
      ::close(report[0]);
      init_main(policy, binds, trial, go[0], report[1], user);
    }
    ::close(go[0]);
    ::close(report[1]);
    std::string names;
    for (const auto& name : attempt.names) names += (names.empty() ? "" : ",") + name;
    if (pid < 0) {
      applied.missing.push_back("namespaces " + names + ": " + errno_text());
      ::close(go[1]);
      ::close(report[0]);
      continue;
    }
    bool mapped = true;
    if (user) {
      try {
        const std::string proc = "/proc/" + std::to_string(pid);
        const uid_t uid = root ? kNobody : ::geteuid();
        const gid_t gid = root ? kNobody : ::getegid();
        // Only a launcher without CAP_SETGID must give up setgroups for its map to be accepted.
        if (!root) write_text(proc + "/setgroups", "deny");
        write_text(proc + "/uid_map", "0 " + std::to_string(uid) + " 1\n");
        write_text(proc + "/gid_map", "0 " + std::to_string(gid) + " 1\n");
      } catch (const SetupError& error) {
        applied.missing.push_back("user namespace map: " + error.what);
        mapped = false;
      }
    }
    (void)!::write(go[1], mapped ? "g" : "x", 1);
    ::close(go[1]);
    int status = wait_for(static_cast<pid_t>(pid));
    std::string text;
    char buffer[4096];
    for (ssize_t n; (n = ::read(report[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
    ::close(report[0]);
    // The workspace goes back to its owner; what the command created in it stays nobody's, readable
    // as its mode says.
    for (std::size_t k = 0; root && k < policy.write.size(); ++k)
      (void)!::chown(policy.write[k].c_str(), owners[k].first, owners[k].second);
    if (text.starts_with("S")) end_like(std::atoi(text.c_str() + 1));
    if (text.starts_with("E")) {
      applied.missing.push_back("namespaces " + names + ": " + text.substr(1));
      continue;
    }
    if (!mapped) continue;
    end_like(status);  // killed before it could report: end the same way
  }

  // No namespace at all: confine this process and become the command.
  applied.namespaces.clear();
  for (std::size_t k = 0; root && k < policy.write.size(); ++k)
    (void)!::chown(policy.write[k].c_str(), kNobody, kNobody);
  run_command(policy, applied, false);
}

}  // namespace d2k::sandbox
