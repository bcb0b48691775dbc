// Measuring the machine's ceilings (core/ceilings.hpp) and caching them per GPU.
#pragma once

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

#include "core/ceilings.hpp"
#include "core/device.hpp"

namespace d2k {

// cuda: the median of device-to-device copies of 1 GiB, of cuBLAS 8192^3 bf16 products and of
// cuBLASLt 8192^3 fp8 (e4m3) and int8 products, all on random data; a one-byte rate comes from the
// first configuration cuBLASLt runs, and one that no configuration gives stays unknown with a warning.
// cpu: the median of memcpy of 256 MiB; no matrix rate. Takes seconds.
Ceilings measure_ceilings(Device device);

// Where the ceilings of this machine's device are cached:
// cache_dir/ceilings-<device>-<device id with anything but [A-Za-z0-9._-] as '_'>.json
std::filesystem::path ceilings_file(Device device, const std::filesystem::path& cache_dir);

// The cached ceilings for this machine's device, measured (and cached) when there are none, when
// the cache cannot be read, when it was written before the one-byte rates recorded their
// configuration and lacks the fp8 rate (the fp8 measurement of that d2k failed on Hopper), or when
// `refresh` is set. Says what it measures on `progress`, if given.
Ceilings cached_ceilings(Device device, const std::filesystem::path& cache_dir, bool refresh,
                         std::ostream* progress);

}  // namespace d2k
