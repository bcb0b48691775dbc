// Comparing two device buffers on the GPU (src/timing/device_compare.cu): the worker checks every timed
// call's outputs against the correctness call's without copying them to the host.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace d2k {

// Adds to *count (one device word, set by the caller) the number of bytes at which `a` and `b` differ.
cudaError_t count_differing_bytes(const void* a, const void* b, std::size_t bytes, unsigned long long* count,
                                  cudaStream_t stream);

}  // namespace d2k
