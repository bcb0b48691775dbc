#include "worker/evidence_write.hpp"

#include <sys/syscall.h>

extern "C" {
// Defined by the inline assembly below: the instruction right after the gated `syscall`.
extern const char d2k_evidence_write_return[];
}

namespace d2k {

// Never inlined or cloned: the label must exist once, in this function's body.
__attribute__((noinline, noclone)) long evidence_write(int fd, const void* data, std::size_t size) {
#if defined(__x86_64__)
  long result;
  asm volatile(
      "syscall\n"
      ".globl d2k_evidence_write_return\n"
      ".hidden d2k_evidence_write_return\n"
      "d2k_evidence_write_return:\n"
      : "=a"(result)
      : "a"(static_cast<long>(SYS_write)), "D"(static_cast<long>(fd)), "S"(data), "d"(size)
      : "rcx", "r11", "memory");
  return result;
#else
#error "the gated evidence write is written for x86-64"
#endif
}

uint64_t evidence_write_address() { return reinterpret_cast<uint64_t>(d2k_evidence_write_return); }

}  // namespace d2k
