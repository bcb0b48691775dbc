// The one place in the worker's process that may write on the evidence stream. The worker's seccomp
// filter (seccomp.hpp) refuses every write to the evidence descriptor whose system call is not this
// function's own `syscall` instruction: the solution shares the process, so it can find the descriptor
// and even the token, but glibc's write(), or any syscall instruction of its own, is refused. To forge
// evidence it would have to jump into this function's code with the registers set, on purpose.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace d2k {

// write(2) of `size` bytes to `fd`, through the gated instruction: the number of bytes written, or
// -errno.
long evidence_write(int fd, const void* data, std::size_t size);

// The address seccomp reports as the instruction pointer of that system call (the instruction after it).
uint64_t evidence_write_address();

}  // namespace d2k
