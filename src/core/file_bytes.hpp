// A whole file's bytes in one read (sized first): a stream-buffer copy (`out << in.rdbuf()`) or an
// istreambuf_iterator costs seconds on the 134 MB tensor files the harness passes around.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace d2k {

// Nothing when the file cannot be opened or read whole.
std::optional<std::string> file_bytes(const std::filesystem::path& file);

}  // namespace d2k
