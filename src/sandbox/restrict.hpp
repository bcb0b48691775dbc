// The layers applied to the confined process itself, right before it runs the command: resource
// limits, no_new_privs, Landlock, dropped capabilities, the seccomp filter.
#pragma once

#include "sandbox/policy.hpp"

namespace d2k::sandbox {

// The Landlock ABI the kernel offers; 0 when it has none (or it is disabled).
int landlock_abi();

// Sets the rlimits of `policy`. `own_user_namespace`: RLIMIT_NPROC then counts this sandbox alone.
void apply_limits(const Policy& policy, bool own_user_namespace, Applied& applied);

// Landlock: reads of `policy.read`, writes of `policy.write`, the device nodes, /proc; no TCP.
// With `filesystem` false (a mount namespace already shows only those paths) only the network and
// scope rules are applied.
void apply_landlock(const Policy& policy, bool filesystem, Applied& applied);

// Drops every capability (bounding set included) so that root inside a user namespace cannot undo
// the mounts, then installs the seccomp filter: no sockets but AF_UNIX and AF_NETLINK, no new
// namespaces, no mounts, no ptrace or kernel-module calls.
void drop_privileges(Applied& applied);
void apply_seccomp(Applied& applied);

}  // namespace d2k::sandbox
