#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "agent/undo_log.hpp"
#include "agent/workspace.hpp"

namespace fs = std::filesystem;
using namespace d2k::agent;

namespace {

struct Dir {
  fs::path path = fs::temp_directory_path() / ("d2k-undo-" + std::to_string(::getpid()));
  Dir() {
    fs::remove_all(path);
    fs::create_directories(path / "ws");
  }
  ~Dir() { fs::remove_all(path); }
};

}  // namespace

TEST(UndoLog, PutsBackWhatATurnChangedAnyBytesIncluded) {
  Dir d;
  const auto a = d.path / "ws" / "a.bin", b = d.path / "ws" / "b.txt", folder = d.path / "ws" / "sub";
  const std::string binary("x\0y\n3 1 7\nd2k-undo 9\n", 21);
  write_file_atomically(a, binary);
  fs::create_directories(folder);
  UndoLog log(d.path / "undo");
  log.save(4, {a, b, a, folder});
  write_file_atomically(a, "changed");
  write_file_atomically(b, "new");
  EXPECT_FALSE(log.restore(3)) << "a save of another turn is not this turn's";
  EXPECT_EQ(*read_whole_file(a), "changed");
  EXPECT_TRUE(log.restore(4));
  EXPECT_EQ(*read_whole_file(a), binary);
  EXPECT_FALSE(fs::exists(b)) << "a file the turn created is removed";
  EXPECT_TRUE(fs::is_directory(folder)) << "a folder is never saved nor touched";
  log.clear();
  EXPECT_FALSE(log.restore(4));
}

TEST(UndoLog, SavesNothingWhenThereIsNothingToSave) {
  Dir d;
  UndoLog log(d.path / "undo");
  log.save(1, {});
  log.save(1, {d.path / "ws"});  // a folder
  EXPECT_FALSE(fs::exists(d.path / "undo" / "turn"));
  EXPECT_FALSE(log.restore(1));
}
