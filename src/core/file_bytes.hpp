// A whole file's bytes in one read (sized first): a stream-buffer copy (`out << in.rdbuf()`) or an
// istreambuf_iterator costs seconds on the 134 MB tensor files the harness passes around. And the other
// way: every byte of a buffer written to a descriptor (the append-only records of agent transcripts and
// judge samples).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace d2k {

// Nothing when the file cannot be opened or read whole.
std::optional<std::string> file_bytes(const std::filesystem::path& file);

// All of `bytes` to `fd` (an interrupted or short write goes on where it stopped); a failure names `file`.
void write_all(int fd, std::string_view bytes, const std::filesystem::path& file);

}  // namespace d2k
