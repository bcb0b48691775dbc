// Errors about a TOML file (task.toml, models.toml) in one voice: "file:line: field = value: why",
// with the value shown as its author wrote it. toml++ is a dependency of whoever includes this.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>

#if __has_include(<toml++/toml.hpp>)
#include <toml++/toml.hpp>
#else
#include <toml++/toml.h>  // Debian's libtomlplusplus-dev ships the single header under this name
#endif

namespace d2k {

// Values in messages as the author would write them: "strings" in double quotes, numbers in their
// shortest exact form (toml++'s own printer uses single quotes and 17 significant digits).
std::string show(const toml::node& node);

class TomlSource {
 public:
  explicit TomlSource(const std::filesystem::path& file) : file_(file.string()) {}

  const std::string& file() const { return file_; }

  // An error about a field as a whole (missing, wrong place).
  [[noreturn]] void error(const toml::node* at, const std::string& field, const std::string& message) const;
  // An error about the value of a field: the message shows the value as written.
  [[noreturn]] void bad(const toml::node& at, const std::string& field, const std::string& message) const;
  // A table whose keys must all be among `allowed` (a typo cannot pass): the first other key is an
  // error that names it as path.key and lists the known ones. `path` empty: the file's top level.
  void closed(const toml::table& table, const std::string& path, std::initializer_list<std::string_view> allowed) const;

 private:
  std::string prefix(const toml::node* at, const std::string& field) const;

  std::string file_;
};

}  // namespace d2k
