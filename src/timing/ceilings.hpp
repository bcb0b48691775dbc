// The machine's measured ceilings, the denominators of speed of light: how fast memory can be
// copied and how fast dense bf16 matrix products run. Measured, not taken from a datasheet, because
// clocks, power limits and the memory system differ from machine to machine.
#pragma once

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

#include "core/device.hpp"

namespace d2k {

struct Ceilings {
  std::string device_name;
  std::string device_id;              // see timing/device_info.hpp
  double copy_gbps = 0;               // bytes read + bytes written per second, in 1e9 bytes
  std::optional<double> bf16_tflops;  // dense bf16 in, fp32 accumulate; none on the cpu device
  std::optional<double> fp8_tflops;   // dense f8e4m3 in, fp32 accumulate (cuBLASLt); none on the cpu device
  std::optional<double> int8_tops;    // dense i8 in, i32 accumulate (cuBLASLt); none on the cpu device
  // How cuBLASLt was asked for the fp8 and int8 rates (LtConfig::describe() of timing/ceilings_lt.hpp):
  // empty where the rate is unknown.
  std::string fp8_config;
  std::string int8_config;
  std::string measured_at;            // ISO 8601, UTC
};

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
