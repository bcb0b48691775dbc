#include "core/trace.hpp"

#include <array>
#include <utility>

namespace d2k {
namespace {

constexpr std::array<std::pair<Status, std::string_view>, 8> kStatuses{{
    {Status::passed, "passed"},
    {Status::incorrect_shape, "incorrect_shape"},
    {Status::incorrect_dtype, "incorrect_dtype"},
    {Status::incorrect_numerics, "incorrect_numerics"},
    {Status::compile_error, "compile_error"},
    {Status::runtime_error, "runtime_error"},
    {Status::timeout, "timeout"},
    {Status::rejected, "rejected"},
}};

}  // namespace

std::string_view name_of(Status status) {
  for (const auto& [value, name] : kStatuses) {
    if (value == status) return name;
  }
  return "runtime_error";  // unreachable for values of the enum
}

std::optional<Status> parse_status(std::string_view name) {
  for (const auto& [value, spelled] : kStatuses) {
    if (spelled == name) return value;
  }
  return std::nullopt;
}

}  // namespace d2k
