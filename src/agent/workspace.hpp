// A run's workspace: the folder the model's file tools act on, and the solution it builds. Every path
// the model gives is relative to it and must stay inside it: absolute paths, `..` and symlinks that
// lead out are refused. Failures are returned as messages for the model, never thrown.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace d2k::agent {

// What list shows of a folder entry. A symlink is shown as a link, never followed: its target may be
// outside the workspace (its path and size are not the model's business) or a loop.
enum class EntryKind { file, folder, link, special };  // special: a FIFO, socket or device

struct FileEntry {
  std::string path;  // relative to the workspace, '/'-separated
  EntryKind kind = EntryKind::file;
  int64_t bytes = 0;  // of a file only
};

struct ReadResult {
  std::string content;
  int total_lines = 0;
  int first_line = 1;  // 1-based, of the content returned
  int last_line = 0;
  bool truncated = false;  // more lines follow, or the byte cap cut the content
  std::string note;  // why the content is not what was asked for: a line longer than the byte cap, cut
};

struct EditResult {
  int line = 0;  // 1-based line where the replacement starts
  int64_t bytes = 0;  // of the file after the edit
};

template <typename T>
using Outcome = std::variant<T, std::string>;  // the value, or why not (for the model)

class Workspace {
 public:
  explicit Workspace(std::filesystem::path dir);
  const std::filesystem::path& dir() const { return dir_; }

  // The absolute path inside the workspace, or why the relative path is refused.
  Outcome<std::filesystem::path> resolve(const std::string& relative) const;

  Outcome<std::vector<FileEntry>> list(const std::string& relative, std::size_t max_entries) const;
  Outcome<ReadResult> read(const std::string& relative, int first_line, int max_lines, std::size_t max_bytes) const;
  // Creates parent folders; replaces the file atomically (write a temporary, rename).
  Outcome<int64_t> write(const std::string& relative, const std::string& content) const;
  // Replaces the one occurrence of old_text with new_text.
  Outcome<EditResult> edit(const std::string& relative, const std::string& old_text, const std::string& new_text) const;

 private:
  std::filesystem::path dir_;  // canonical
};

// Atomic replacement of a file's content, flushed to disk before the rename.
void write_file_atomically(const std::filesystem::path& file, const std::string& content);
// The content of a regular file; nothing for a missing file or anything else (a folder, a FIFO, a
// socket, a device): those are never read, so a FIFO cannot block the caller.
std::optional<std::string> read_whole_file(const std::filesystem::path& file);

}  // namespace d2k::agent
