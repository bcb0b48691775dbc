#include "worker/sent_files.hpp"

#include "core/error.hpp"
#include "core/file_bytes.hpp"

namespace d2k {

const std::string& SentFiles::bytes(const std::string& file) {
  if (auto it = read_.find(file); it != read_.end()) return it->second;
  auto bytes = file_bytes(dir_ / file);
  if (!bytes) fail("cannot read {}", (dir_ / file).string());
  return read_.emplace(file, std::move(*bytes)).first->second;
}

}  // namespace d2k
