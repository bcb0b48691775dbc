#include "agent/workspace.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

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
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string{std::istreambuf_iterator<char>(in), {}};
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
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, error);
       it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (error) break;
    FileEntry entry;
    entry.path = fs::relative(it->path(), dir_).generic_string();
    if (entry.path.starts_with(".") && entry.path.ends_with(".tmp")) continue;
    entry.directory = it->is_directory();
    if (!entry.directory) entry.bytes = static_cast<int64_t>(it->file_size(error));
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
  if (fs::is_directory(file)) return fmt::format("'{}' is a folder; list_files shows what it holds", relative);
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
  if (file == dir_ || fs::is_directory(file)) return fmt::format("'{}' is a folder", relative);
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
  if (old_text.empty()) return std::string("old_text is empty; give the exact text to replace (write_file creates files)");
  const auto text = read_whole_file(file);
  if (!text || fs::is_directory(file)) return fmt::format("'{}' does not exist", relative);
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
