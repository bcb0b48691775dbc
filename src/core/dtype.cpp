#include "core/dtype.hpp"

#include <array>
#include <utility>

namespace d2k {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
  bool floating;
};

constexpr std::array<DTypeInfo, 9> kDTypes{{
    {DType::f32, "f32", 4, true},
    {DType::f16, "f16", 2, true},
    {DType::bf16, "bf16", 2, true},
    {DType::f8e4m3, "f8e4m3", 1, true},
    {DType::i32, "i32", 4, false},
    {DType::i64, "i64", 8, false},
    {DType::i8, "i8", 1, false},
    {DType::u8, "u8", 1, false},
    {DType::f64, "f64", 8, true},
}};

const DTypeInfo& info(DType dtype) {
  for (const auto& entry : kDTypes) {
    if (entry.dtype == dtype) return entry;
  }
  // Only reachable through a cast from an out-of-range ABI value; the first entry keeps this total.
  return kDTypes[0];
}

}  // namespace

std::size_t size_of(DType dtype) { return info(dtype).size; }
bool is_floating(DType dtype) { return info(dtype).floating; }
std::string_view name_of(DType dtype) { return info(dtype).name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& entry : kDTypes) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

}  // namespace d2k
