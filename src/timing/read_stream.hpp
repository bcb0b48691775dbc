// The memory's read rate, one of the ceilings (timing/ceilings.hpp): every byte of a buffer far larger than
// the L2 read once by a kernel that writes nothing but one word (src/timing/read_stream.cu). Kernels that
// read much more than they write (a MoE sum over k experts, an activation over two halves) can move bytes
// faster than a copy, whose reads and writes share the memory bus; the floor must not sit above them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace d2k {

// Reads `bytes` (a multiple of 64) of `buffer` on `stream` with `blocks` blocks of 512 threads, each
// thread keeping four 16-byte loads in flight; `sink` is one device word.
cudaError_t read_stream(const void* buffer, std::size_t bytes, int blocks, unsigned* sink, cudaStream_t stream);

}  // namespace d2k
