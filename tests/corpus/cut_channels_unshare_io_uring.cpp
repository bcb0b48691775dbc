// Round 2, class 1 (threats 16 and 6): cuts the worker's channels by routes a filter on close, dup2 and
// dup3 does not see. In d2k_prepare: (1) unshare(CLONE_FILES), so that the descriptor table is this
// thread's own (the worker's main thread: the solution runs on it) and then close() of every pipe in it;
// (2) io_uring, whose IORING_OP_CLOSE closes a descriptor without any close system call. Each route that
// is refused, and each pipe left open, is reported as the solution's error; every call computes
// honestly, so nothing but the refusals can end it.
// Expected: runtime_error, "Operation not permitted" (seccomp refuses unshare and io_uring_setup, and
// close on the channel descriptors). A filter that allowed either route would let the channels be cut.
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

#include <linux/io_uring.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "forge_frames.h"

namespace {

// Closes each of `fds` through an io_uring of its own; returns what was refused.
std::string close_through_io_uring(const std::vector<int>& fds) {
  io_uring_params params{};
  const int ring = int(::syscall(SYS_io_uring_setup, 8, &params));
  if (ring < 0) return std::string("io_uring_setup: ") + std::strerror(errno) + "; ";
  const size_t sq_bytes = params.sq_off.array + params.sq_entries * sizeof(unsigned);
  const size_t cq_bytes = params.cq_off.cqes + params.cq_entries * sizeof(io_uring_cqe);
  const bool single = (params.features & IORING_FEAT_SINGLE_MMAP) != 0;
  auto* sq = static_cast<char*>(::mmap(nullptr, single && cq_bytes > sq_bytes ? cq_bytes : sq_bytes,
                                       PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING));
  auto* cq = single ? sq
                    : static_cast<char*>(::mmap(nullptr, cq_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                                                ring, IORING_OFF_CQ_RING));
  auto* sqes = static_cast<io_uring_sqe*>(::mmap(nullptr, params.sq_entries * sizeof(io_uring_sqe),
                                                 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES));
  if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) return std::string("io_uring mmap: ") + std::strerror(errno) + "; ";
  auto* sq_tail = reinterpret_cast<unsigned*>(sq + params.sq_off.tail);
  const unsigned sq_mask = *reinterpret_cast<unsigned*>(sq + params.sq_off.ring_mask);
  auto* sq_array = reinterpret_cast<unsigned*>(sq + params.sq_off.array);
  auto* cq_head = reinterpret_cast<unsigned*>(cq + params.cq_off.head);
  const unsigned cq_mask = *reinterpret_cast<unsigned*>(cq + params.cq_off.ring_mask);
  auto* cqes = reinterpret_cast<io_uring_cqe*>(cq + params.cq_off.cqes);
  std::string refused;
  for (int fd : fds) {
    const unsigned tail = *sq_tail, slot = tail & sq_mask;
    sqes[slot] = io_uring_sqe{};
    sqes[slot].opcode = IORING_OP_CLOSE;
    sqes[slot].fd = fd;
    sq_array[slot] = slot;
    __atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
    if (::syscall(SYS_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, nullptr, 0) < 0) {
      refused += std::string("io_uring_enter: ") + std::strerror(errno) + "; ";
      break;
    }
    const unsigned head = __atomic_load_n(cq_head, __ATOMIC_ACQUIRE);
    const int result = cqes[head & cq_mask].res;
    __atomic_store_n(cq_head, head + 1, __ATOMIC_RELEASE);
    if (result < 0) refused += "io_uring close(" + std::to_string(fd) + "): " + std::strerror(-result) + "; ";
  }
  ::close(ring);
  return refused;
}

}  // namespace

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  std::string refused;
  std::vector<int> pipes;
  for (int fd : forge::open_fds())
    if (forge::is_pipe(fd)) pipes.push_back(fd);
  if (::unshare(CLONE_FILES) != 0) refused += std::string("unshare(CLONE_FILES): ") + std::strerror(errno) + "; ";
  std::vector<int> left;
  for (int fd : pipes)
    if (::close(fd) != 0 && errno != EBADF) left.push_back(fd);
  refused += close_through_io_uring(left);
  for (int fd : left)
    if (::fcntl(fd, F_GETFD) != -1) refused += "pipe " + std::to_string(fd) + " " + forge::describe_fd(fd) + " still open; ";
  if (refused.empty()) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "the worker's channels stayed open: %s", refused.c_str());
  return 1;
}

extern "C" int d2k_run(const d2k_call* call) {
  quantize(call);
  return 0;
}
