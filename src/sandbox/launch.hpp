// Runs a command confined by a Policy: namespaces and a new root where the kernel allows them,
// Landlock and seccomp where it does not, limits always. Returns only on failure to start; otherwise
// it ends the process with the command's own exit status or signal.
#pragma once

#include "sandbox/policy.hpp"

namespace d2k::sandbox {

// Exit code of the launcher when the sandbox could not be set up (strict mode, or a broken setup);
// 127 stays "command not found".
constexpr int kSetupFailed = 125;

[[noreturn]] void launch(const Policy& policy);

}  // namespace d2k::sandbox
