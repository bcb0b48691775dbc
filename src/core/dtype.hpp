// Element types: one enum shared by the task model, the worker protocol and the C ABI.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "d2k/solution.h"

namespace d2k {

enum class DType {
  f32 = D2K_FLOAT32,
  f16 = D2K_FLOAT16,
  bf16 = D2K_BFLOAT16,
  f8e4m3 = D2K_FLOAT8_E4M3,
  i32 = D2K_INT32,
  i64 = D2K_INT64,
  i8 = D2K_INT8,
  u8 = D2K_UINT8,
  f64 = D2K_FLOAT64,
};

std::size_t size_of(DType dtype);
bool is_floating(DType dtype);
// The names used in task.toml, JSON and messages: "f32", "bf16", "f8e4m3", "i32", ...
std::string_view name_of(DType dtype);
std::optional<DType> parse_dtype(std::string_view name);
inline d2k_dtype to_abi(DType dtype) { return static_cast<d2k_dtype>(dtype); }

}  // namespace d2k
