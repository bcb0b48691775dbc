// The machine's measured ceilings, the denominators of speed of light: how fast memory can be copied
// and read, and how fast dense matrix products run. Measured (timing/ceilings.hpp), not taken from a datasheet,
// because clocks, power limits and the memory system differ from machine to machine.
#pragma once

#include <optional>
#include <string>

#include "core/dtype.hpp"

namespace d2k {

struct Ceilings {
  std::string device_name;
  std::string device_id;              // see timing/device_info.hpp
  double copy_gbps = 0;               // bytes read + bytes written per second, in 1e9 bytes
  double read_gbps = 0;               // bytes read per second by a kernel that writes nothing, in 1e9 bytes
  std::optional<double> bf16_tflops;  // dense bf16 in, fp32 accumulate; none on the cpu device
  std::optional<double> fp8_tflops;   // dense f8e4m3 in, fp32 accumulate (cuBLASLt); none on the cpu device
  std::optional<double> int8_tops;    // dense i8 in, i32 accumulate (cuBLASLt); none on the cpu device
  // How cuBLASLt was asked for the fp8 and int8 rates (LtConfig::describe() of timing/ceilings_lt.hpp):
  // empty where the rate is unknown.
  std::string fp8_config;
  std::string int8_config;
  std::string measured_at;            // ISO 8601, UTC
  // What bounds the matrix rates from above, read off the device rather than measured: its SM count,
  // its highest SM clock and its compute capability (major * 10 + minor). 0 where unknown (the cpu
  // device, a cache from before they were recorded).
  int sm_count = 0;
  int sm_max_mhz = 0;
  int compute_capability = 0;
  // What bounds the memory rates from above, read off the device too: the memory's peak clock and its
  // bus width in bits. 0 where unknown.
  int memory_max_mhz = 0;
  int memory_bus_bits = 0;

  // The fastest the memory was measured to move bytes, copying or reading (1e9 bytes per second): the
  // denominator of a task's minimum bytes. A copy shares the bus between reads and writes; a kernel that
  // mostly reads can beat it, never the read rate.
  double memory_gbps() const;

  // The rate a task's FLOPs run at (Task::flops_dtype: bf16, f8e4m3 or i8), in 1e12 per second; none
  // when not measured.
  std::optional<double> matrix_rate(DType flops_dtype) const;

  // The most the device's tensor cores can do for `flops_dtype` at their highest clock, in 1e12 per
  // second: dense operations per SM per clock (per architecture, from the instruction rates) x SMs x
  // the highest SM clock. None where the architecture's rate is not known here. The measured rate is a
  // library product run back to back, whose clock power limits hold down; a shorter kernel, or one
  // scheduled better, can beat it, never this.
  std::optional<double> matrix_bound(DType flops_dtype) const;

  // The most the memory can move, in 1e9 bytes per second: its peak clock x 2 transfers per clock
  // (double data rate) x the bus width. H200: 3201 MHz x 2 x 6016 bits = 4814 GB/s (its datasheet's
  // 4.8 TB/s); the measured read rate is 92-93% of it. The measured rate is one streaming kernel's,
  // so a kernel that reads as well or better can match or beat it by a few percent, never this.
  // None where unknown.
  std::optional<double> memory_bound_gbps() const;
};

}  // namespace d2k
