// Evicting the call's data from the L2 before a cold sample (src/timing/l2_flush.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace d2k {

// Reads `bytes` of `buffer` (filled once by the caller) on `stream`; `sink` is one device word.
cudaError_t flush_l2_by_reading(const void* buffer, std::size_t bytes, unsigned* sink, cudaStream_t stream);

}  // namespace d2k
