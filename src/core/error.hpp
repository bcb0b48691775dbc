// The one exception type d2k throws inside a process. Messages name the file, the field and the value.
// Once a failure crosses the runner boundary it becomes a trace status instead (core/trace.hpp).
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace d2k {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace d2k
