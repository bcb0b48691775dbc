#include "agent/undo_log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>

#include "agent/workspace.hpp"
#include "core/error.hpp"

namespace d2k::agent {
namespace {

namespace fs = std::filesystem;

// The file: "d2k-undo <turn>\n", then per file "<path bytes> <0|1: existed> <content bytes>\n<path><content>".
// Lengths, not separators: a path or a content may hold any byte.
struct Entry {
  fs::path path;
  std::optional<std::string> content;  // none: the file did not exist
};

std::string encode(int turn, const std::vector<Entry>& entries) {
  std::string out = fmt::format("d2k-undo {}\n", turn);
  for (const auto& e : entries) {
    const auto& path = e.path.native();
    out += fmt::format("{} {} {}\n", path.size(), e.content ? 1 : 0, e.content ? e.content->size() : 0);
    out += path;
    if (e.content) out += *e.content;
  }
  return out;
}

// Reads one "<a> <b> <c>\n" header at `pos`; false at the end or on a malformed one.
bool read_header(const std::string& text, std::size_t& pos, std::size_t& path_bytes, int& existed, std::size_t& bytes) {
  const auto nl = text.find('\n', pos);
  if (nl == std::string::npos) return false;
  unsigned long long a = 0, c = 0;
  if (std::sscanf(text.c_str() + pos, "%llu %d %llu", &a, &existed, &c) != 3) return false;
  path_bytes = a;
  bytes = c;
  pos = nl + 1;
  return pos + path_bytes + bytes <= text.size();
}

std::vector<Entry> decode(const std::string& text, const fs::path& file, int& turn) {
  if (std::sscanf(text.c_str(), "d2k-undo %d\n", &turn) != 1) fail("{}: not an undo log", file.string());
  std::vector<Entry> entries;
  std::size_t pos = text.find('\n') + 1;
  while (pos < text.size()) {
    std::size_t path_bytes = 0, bytes = 0;
    int existed = 0;
    if (!read_header(text, pos, path_bytes, existed, bytes)) fail("{}: a malformed entry at byte {}", file.string(), pos);
    Entry e{text.substr(pos, path_bytes), std::nullopt};
    pos += path_bytes;
    if (existed) e.content = text.substr(pos, bytes);
    pos += bytes;
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace

void UndoLog::save(int turn, const std::vector<fs::path>& files) const {
  std::vector<Entry> entries;
  for (const auto& path : files) {
    if (std::any_of(entries.begin(), entries.end(), [&](const Entry& e) { return e.path == path; })) continue;
    std::error_code error;
    const auto status = fs::symlink_status(path, error);
    if (fs::exists(status) && !fs::is_regular_file(status)) continue;
    entries.push_back({path, read_whole_file(path)});
  }
  if (entries.empty()) return;
  fs::create_directories(dir_);
  write_file_atomically(file(), encode(turn, entries));  // flushed: it must be on disk before a file changes
}

bool UndoLog::restore(int turn) const {
  const auto text = read_whole_file(file());
  if (!text) return false;
  int saved_turn = -1;
  const auto entries = decode(*text, file(), saved_turn);
  if (saved_turn != turn) return false;  // a finished turn's log that was not yet dropped
  for (const auto& e : entries) {
    if (e.content) {
      write_file_atomically(e.path, *e.content);
    } else {
      std::error_code ignored;
      if (fs::is_regular_file(fs::symlink_status(e.path, ignored))) fs::remove(e.path, ignored);
    }
  }
  return true;
}

void UndoLog::clear() const {
  std::error_code ignored;
  fs::remove(file(), ignored);
}

}  // namespace d2k::agent
