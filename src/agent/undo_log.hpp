// The undo log of a turn's file changes: undo/turn in the run folder. Before the first write_file or
// edit_file of a turn runs, every file the turn's writes and edits name is saved as it is, in one file
// flushed to disk once. A resumed turn whose calls were cut short (a kill, a machine crash that lost
// results not yet flushed) puts those files back and applies the turn's writes and edits that have a
// result again (file tools are deterministic) before it runs the calls without one: every call then
// sees the workspace it saw the first time. One flush a turn instead of several a call (issue 18, 20).
#pragma once

#include <filesystem>
#include <vector>

namespace d2k::agent {

class UndoLog {
 public:
  explicit UndoLog(std::filesystem::path dir) : dir_(std::move(dir)) {}

  // Saves `files` (absolute paths in the workspace) as turn `turn` found them: a regular file's content,
  // or that there was none. Folders, FIFOs and devices are not saved: the file tools refuse them.
  void save(int turn, const std::vector<std::filesystem::path>& files) const;

  // Puts the files saved for `turn` back (a file that did not exist is removed); false when the log
  // holds no save of that turn.
  bool restore(int turn) const;

  // Drops the log, once the turn's results are on disk.
  void clear() const;

 private:
  std::filesystem::path file() const { return dir_ / "turn"; }
  std::filesystem::path dir_;
};

}  // namespace d2k::agent
