#include "worker/sent_files.hpp"

#include <fstream>

#include "core/error.hpp"

namespace d2k {

const std::string& SentFiles::bytes(const std::string& file) {
  if (auto it = read_.find(file); it != read_.end()) return it->second;
  const auto path = dir_ / file;
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (error) fail("cannot read {}: {}", path.string(), error.message());
  std::string bytes(size, '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(bytes.data(), static_cast<std::streamsize>(size));  // one read: no stream-buffer copies
  if (!in || static_cast<std::uintmax_t>(in.gcount()) != size) fail("cannot read the {} bytes of {}", size, path.string());
  return read_.emplace(file, std::move(bytes)).first->second;
}

}  // namespace d2k
