// The worker's device-side helpers for the timed calls' inputs (src/timing/device_patch.cu): the keyed
// digest of a buffer (core/keyed_digest.hpp) and the swaps of a call's patch (core/call_patch.hpp),
// without copying the buffer to the host.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace d2k {

// The keyed digest of `bytes` bytes at `data` (device memory, 8-byte aligned). `scratch` is one device
// word the function may overwrite. Synchronizes `stream`.
cudaError_t device_digest(uint64_t key, const void* data, std::size_t bytes, unsigned long long* scratch,
                          cudaStream_t stream, uint64_t* digest);

// Swaps the elements at offsets a[i] and b[i] (in elements of `element_bytes`: 1, 2, 4 or 8) of
// `storage`, for i < count; `offsets` is device memory holding a[0..count) then b[0..count). The pairs
// must be distinct elements.
cudaError_t device_swap(void* storage, std::size_t element_bytes, const int64_t* offsets, int count,
                        cudaStream_t stream);

}  // namespace d2k
