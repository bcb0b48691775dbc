// Input rotation: how many copies of one call's tensors the timed calls cycle through. Flushing the L2
// before a call is not enough on its own: the flush may leave part of a buffer of about the L2's size
// resident, and a call that finds its inputs at the address of the previous call can be served from
// whatever the flush left. Cycling through copies that together hold several times the last-level
// cache means the copy a call uses was last touched a whole cycle ago.
#pragma once

#include <cstddef>

#include "core/device.hpp"
#include "core/worker_protocol.hpp"

namespace d2k {

// The cpu device rotates too (the same code path, so CI runs it), within this much host memory.
inline constexpr std::size_t kCpuRotationBudgetBytes = std::size_t{64} << 20;

// How many copies of a call's tensors (set_bytes of them, plus set_overhead_bytes of allocation each,
// such as guard regions) the timed calls cycle through:
//  - enough that the copies hold config.rotate_cache_multiple x cache_bytes together;
//  - at least two whenever two fit, so that no call finds its inputs where the previous call left them;
//  - at most config.rotate_max_sets, and as many as fit in budget_bytes (one at least).
// One copy when rotate_cache_multiple <= 0 or set_bytes is 0.
int rotation_sets(std::size_t set_bytes, std::size_t set_overhead_bytes, std::size_t cache_bytes,
                  std::size_t budget_bytes, const TimingConfig& config);

// cuda: the current GPU's L2 size; cpu: the last-level cache from sysconf, 32 MiB when it says nothing.
std::size_t last_level_cache_bytes(Device device);

}  // namespace d2k
