#include "agent/workspace.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/error.hpp"

namespace d2k::agent {
namespace fs = std::filesystem;

namespace {

bool inside(const fs::path& root, const fs::path& path) {
  auto r = root.begin(), p = path.begin();
  for (; r != root.end(); ++r, ++p)
    if (p == path.end() || *p != *r) return false;
  return true;
}

// Why the file tools may not act on what is at `file`, or nothing when it is a regular file or absent.
std::optional<std::string> not_a_file(const fs::path& file, const std::string& relative) {
  std::error_code error;
  const auto status = fs::status(file, error);
  if (fs::is_directory(status)) return fmt::format("'{}' is a folder, not a file (list_files shows what it holds)", relative);
  if (fs::exists(status) && !fs::is_regular_file(status))
    return fmt::format("'{}' is not a regular file (a FIFO, socket or device); the file tools act on regular files only", relative);
  return std::nullopt;
}

// The longest prefix of text of at most max_bytes that does not end inside a UTF-8 character.
std::size_t utf8_prefix(const std::string& text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text.size();
  std::size_t cut = max_bytes;
  for (int back = 0; back < 3 && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80; ++back) --cut;
  return cut;
}

}  // namespace

void write_file_atomically(const fs::path& file, const std::string& content) {
  const auto temporary = file.parent_path() / ("." + file.filename().string() + ".tmp");
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot write {}: {}", temporary.string(), std::strerror(errno));
  std::size_t done = 0;
  while (done < content.size()) {
    const auto n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      fail("cannot write {}: {}", temporary.string(), std::strerror(errno));
    }
    done += static_cast<std::size_t>(n);
  }
  ::fdatasync(fd);
  ::close(fd);
  fs::rename(temporary, file);
}

std::optional<std::string> read_whole_file(const fs::path& file) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; fstat then refuses it.
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return std::nullopt;
  }
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const auto n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      fail("cannot read {}: {}", file.string(), std::strerror(errno));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

Workspace::Workspace(fs::path dir) {
  fs::create_directories(dir);
  dir_ = fs::canonical(dir);
}

Outcome<fs::path> Workspace::resolve(const std::string& relative) const {
  if (relative.empty()) return std::string("the path is empty");
  if (relative.find('\0') != std::string::npos) return std::string("the path holds a NUL byte");
  const fs::path given(relative);
  if (given.is_absolute()) return fmt::format("'{}' is absolute; give a path relative to the workspace", relative);
  for (const auto& part : given)
    if (part == "..") return fmt::format("'{}' leaves the workspace ('..' is not allowed)", relative);
  const auto joined = (dir_ / given).lexically_normal();
  // Symlinks: whatever part of the path exists must resolve to somewhere inside the workspace.
  std::error_code error;
  const auto real = fs::weakly_canonical(joined, error);
  if (error) return fmt::format("'{}': {}", relative, error.message());
  if (!inside(dir_, real)) return fmt::format("'{}' leads out of the workspace (through a symlink)", relative);
  return real;
}

Outcome<std::vector<FileEntry>> Workspace::list(const std::string& relative, std::size_t max_entries) const {
  auto where = resolve(relative.empty() ? "." : relative);
  if (auto* why = std::get_if<std::string>(&where)) return *why;
  const auto root = std::get<fs::path>(where);
  std::error_code error;
  if (!fs::is_directory(root, error)) return fmt::format("'{}' is not a folder", relative);
  std::vector<FileEntry> entries;
  // Nothing here follows a symlink: not the iterator (no follow_directory_symlink), not the entry's
  // type (symlink_status), not its path (lexically_relative, where fs::relative would canonicalize).
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, error);
       it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (error) break;
    FileEntry entry;
    entry.path = it->path().lexically_relative(dir_).generic_string();
    if (entry.path.starts_with(".") && entry.path.ends_with(".tmp")) continue;
    std::error_code type_error;
    const auto status = it->symlink_status(type_error);
    if (fs::is_symlink(status)) {
      entry.kind = EntryKind::link;
    } else if (fs::is_directory(status)) {
      entry.kind = EntryKind::folder;
    } else if (fs::is_regular_file(status)) {
      entry.bytes = static_cast<int64_t>(it->file_size(type_error));
      if (type_error) entry.bytes = 0;
    } else {
      entry.kind = EntryKind::special;
    }
    entries.push_back(entry);
    if (entries.size() >= max_entries) break;
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return entries;
}

Outcome<ReadResult> Workspace::read(const std::string& relative, int first_line, int max_lines, std::size_t max_bytes) const {
  auto where = resolve(relative);
  if (auto* why = std::get_if<std::string>(&where)) return *why;
  const auto file = std::get<fs::path>(where);
  if (auto why = not_a_file(file, relative)) return *why;
  const auto text = read_whole_file(file);
  if (!text) return fmt::format("'{}' does not exist", relative);
  ReadResult result;
  result.first_line = std::max(1, first_line);
  int line = 1;
  std::size_t pos = 0;
  while (pos < text->size() && line < result.first_line) {
    const auto nl = text->find('\n', pos);
    if (nl == std::string::npos) { pos = text->size(); break; }
    pos = nl + 1;
    ++line;
  }
  result.last_line = line - 1;
  while (pos < text->size() && result.last_line - result.first_line + 1 < max_lines) {
    auto nl = text->find('\n', pos);
    const auto end = nl == std::string::npos ? text->size() : nl + 1;
    if (result.content.size() + (end - pos) > max_bytes) {
      result.truncated = true;
      if (!result.content.empty()) break;  // the next call starts at this line
      // One line longer than the cap: its head, cut at the cap, rather than nothing at all.
      const auto line_text = text->substr(pos, (nl == std::string::npos ? text->size() : nl) - pos);
      const auto cut = utf8_prefix(line_text, max_bytes);
      result.content = line_text.substr(0, cut);
      ++result.last_line;
      result.note = fmt::format("line {} is {} bytes, more than the {} bytes one read_file returns: only its first {} bytes "
                                "are shown, the rest of the line cannot be read with read_file",
                                result.first_line, line_text.size(), max_bytes, cut);
      pos = end;
      break;
    }
    result.content.append(*text, pos, end - pos);
    pos = end;
    ++result.last_line;
  }
  if (pos < text->size()) result.truncated = true;
  result.total_lines = static_cast<int>(std::count(text->begin(), text->end(), '\n')) +
                       (!text->empty() && text->back() != '\n' ? 1 : 0);
  return result;
}

Outcome<int64_t> Workspace::write(const std::string& relative, const std::string& content) const {
  auto where = resolve(relative);
  if (auto* why = std::get_if<std::string>(&where)) return *why;
  const auto file = std::get<fs::path>(where);
  if (auto why = not_a_file(file, relative)) return *why;
  std::error_code error;
  fs::create_directories(file.parent_path(), error);
  if (error) return fmt::format("cannot create the folder of '{}': {}", relative, error.message());
  try {
    write_file_atomically(file, content);
  } catch (const std::exception& e) {
    return fmt::format("cannot write '{}': {}", relative, e.what());
  }
  return static_cast<int64_t>(content.size());
}

Outcome<EditResult> Workspace::edit(const std::string& relative, const std::string& old_text, const std::string& new_text) const {
  auto where = resolve(relative);
  if (auto* why = std::get_if<std::string>(&where)) return *why;
  const auto file = std::get<fs::path>(where);
  if (auto why = not_a_file(file, relative)) return *why;
  if (old_text.empty()) return std::string("old_text is empty; give the exact text to replace (write_file creates files)");
  const auto text = read_whole_file(file);
  if (!text) return fmt::format("'{}' does not exist", relative);
  const auto first = text->find(old_text);
  if (first == std::string::npos)
    return fmt::format("old_text was not found in '{}' (it must match exactly, whitespace included; read_file shows the current text)", relative);
  int count = 0;
  std::vector<int> lines;
  for (auto at = first; at != std::string::npos; at = text->find(old_text, at + 1)) {
    ++count;
    if (lines.size() < 10) lines.push_back(1 + static_cast<int>(std::count(text->begin(), text->begin() + at, '\n')));
  }
  if (count > 1) {
    std::string where_lines;
    for (int l : lines) where_lines += (where_lines.empty() ? "" : ", ") + std::to_string(l);
    return fmt::format("old_text occurs {} times in '{}' (at lines {}); include more context so that it is unique", count,
                       relative, where_lines);
  }
  std::string updated = text->substr(0, first) + new_text + text->substr(first + old_text.size());
  try {
    write_file_atomically(file, updated);
  } catch (const std::exception& e) {
    return fmt::format("cannot write '{}': {}", relative, e.what());
  }
  return EditResult{1 + static_cast<int>(std::count(text->begin(), text->begin() + first, '\n')),
                    static_cast<int64_t>(updated.size())};
}

}  // namespace d2k::agent
