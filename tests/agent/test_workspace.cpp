#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "agent/workspace.hpp"

namespace fs = std::filesystem;
using d2k::agent::EditResult;
using d2k::agent::ReadResult;
using d2k::agent::Workspace;

namespace {

fs::path fresh_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("d2k-agent-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

template <typename T, typename O>
std::string error_of(const O& outcome) {
  auto* why = std::get_if<std::string>(&outcome);
  return why ? *why : std::string();
}

}  // namespace

TEST(Workspace, RefusesPathsThatLeaveIt) {
  const auto root = fresh_dir("paths");
  Workspace ws(root / "ws");
  fs::create_directories(root / "outside");
  fs::create_symlink(root / "outside", root / "ws" / "escape");
  fs::create_symlink(root / "ws" / "sub", root / "ws" / "inner");
  fs::create_directories(root / "ws" / "sub");

  EXPECT_NE(error_of<fs::path>(ws.resolve("../x")).find("leaves the workspace"), std::string::npos);
  EXPECT_NE(error_of<fs::path>(ws.resolve("a/../../x")).find("leaves the workspace"), std::string::npos);
  EXPECT_NE(error_of<fs::path>(ws.resolve("/etc/passwd")).find("absolute"), std::string::npos);
  EXPECT_NE(error_of<fs::path>(ws.resolve("escape/file.cpp")).find("symlink"), std::string::npos);
  EXPECT_FALSE(error_of<fs::path>(ws.resolve("")).empty());
  // Writing through a symlink out is refused and nothing appears outside.
  EXPECT_FALSE(error_of<int64_t>(ws.write("escape/x.cpp", "int x;")).empty());
  EXPECT_FALSE(fs::exists(root / "outside" / "x.cpp"));
  // A symlink that stays inside is fine.
  EXPECT_TRUE(error_of<int64_t>(ws.write("inner/y.cpp", "int y;")).empty());
  EXPECT_TRUE(fs::exists(root / "ws" / "sub" / "y.cpp"));
  EXPECT_TRUE(error_of<int64_t>(ws.write("deep/er/z.cpp", "int z;")).empty());
  fs::remove_all(root);
}

TEST(Workspace, EditNeedsOneExactOccurrence) {
  const auto root = fresh_dir("edit");
  Workspace ws(root);
  ASSERT_TRUE(error_of<int64_t>(ws.write("a.cpp", "int a = 1;\nint b = 1;\nint c = 2;\n")).empty());
  const auto missing = error_of<EditResult>(ws.edit("a.cpp", "int d", "int e"));
  EXPECT_NE(missing.find("not found"), std::string::npos) << missing;
  const auto twice = error_of<EditResult>(ws.edit("a.cpp", "= 1;", "= 3;"));
  EXPECT_NE(twice.find("occurs 2 times"), std::string::npos) << twice;
  EXPECT_NE(twice.find("lines 1, 2"), std::string::npos) << twice;
  EXPECT_FALSE(error_of<EditResult>(ws.edit("a.cpp", "", "x")).empty());
  EXPECT_FALSE(error_of<EditResult>(ws.edit("nope.cpp", "a", "b")).empty());
  auto edited = ws.edit("a.cpp", "int b = 1;", "int b = 7;");
  ASSERT_TRUE(std::holds_alternative<EditResult>(edited));
  EXPECT_EQ(std::get<EditResult>(edited).line, 2);
  EXPECT_EQ(*d2k::agent::read_whole_file(root / "a.cpp"), "int a = 1;\nint b = 7;\nint c = 2;\n");
  fs::remove_all(root);
}

TEST(Workspace, ReadPagesThroughRandomText) {
  const auto root = fresh_dir("read");
  Workspace ws(root);
  std::mt19937 random(7);
  std::string text;
  const int lines = 1000 + static_cast<int>(random() % 500);
  for (int i = 0; i < lines; ++i) text += "line " + std::to_string(i + 1) + std::string(random() % 40, 'x') + "\n";
  ASSERT_TRUE(error_of<int64_t>(ws.write("big.txt", text)).empty());
  std::string again;
  int next = 1;
  for (int pages = 0; pages < 100; ++pages) {
    auto read = ws.read("big.txt", next, 97, 3000);
    ASSERT_TRUE(std::holds_alternative<ReadResult>(read));
    const auto& r = std::get<ReadResult>(read);
    EXPECT_EQ(r.first_line, next);
    EXPECT_EQ(r.total_lines, lines);
    EXPECT_LE(r.content.size(), 3000u);
    again += r.content;
    next = r.last_line + 1;
    if (!r.truncated) break;
  }
  EXPECT_EQ(again, text);
  fs::remove_all(root);
}

TEST(Workspace, ListsFilesWithSizes) {
  const auto root = fresh_dir("list");
  Workspace ws(root);
  ws.write("b.cpp", "12345");
  ws.write("dir/a.h", "1");
  auto listed = ws.list(".", 100);
  ASSERT_TRUE(std::holds_alternative<std::vector<d2k::agent::FileEntry>>(listed));
  const auto& entries = std::get<std::vector<d2k::agent::FileEntry>>(listed);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].path, "b.cpp");
  EXPECT_EQ(entries[0].bytes, 5);
  EXPECT_EQ(entries[1].path, "dir");
  EXPECT_EQ(entries[1].kind, d2k::agent::EntryKind::folder);
  EXPECT_EQ(entries[2].path, "dir/a.h");
  fs::remove_all(root);
}

TEST(Workspace, WriteAndEditOfAFolderAreRefusedNamingIt) {
  const auto root = fresh_dir("folder");
  Workspace ws(root);
  ws.write("sub/a.cpp", "int a;");
  for (const std::string path : {".", "sub", "sub/"}) {
    const auto wrote = error_of<int64_t>(ws.write(path, "x"));
    EXPECT_NE(wrote.find("'" + path + "' is a folder"), std::string::npos) << wrote;
    const auto edited = error_of<EditResult>(ws.edit(path, "a", "b"));
    EXPECT_NE(edited.find("'" + path + "' is a folder"), std::string::npos) << edited;
  }
  EXPECT_TRUE(fs::is_directory(root / "sub"));
  fs::remove_all(root);
}

TEST(Workspace, ReadWholeFileNeverReadsAFolderOrAFifo) {
  const auto root = fresh_dir("special");
  Workspace ws(root);
  ASSERT_EQ(::mkfifo((root / "pipe").c_str(), 0644), 0);
  EXPECT_FALSE(d2k::agent::read_whole_file(root)) << "a folder is not read as a file";
  EXPECT_FALSE(d2k::agent::read_whole_file(root / "pipe")) << "a FIFO would block without a writer";
  const auto read = error_of<ReadResult>(ws.read("pipe", 1, 10, 100));
  EXPECT_NE(read.find("'pipe' is not a regular file"), std::string::npos) << read;
  EXPECT_FALSE(error_of<EditResult>(ws.edit("pipe", "a", "b")).empty());
  EXPECT_FALSE(error_of<int64_t>(ws.write("pipe", "x")).empty());
  EXPECT_FALSE(fs::is_regular_file(root / "pipe"));
  fs::remove_all(root);
}

TEST(Workspace, ReadCutsALineLongerThanTheCapWithANote) {
  const auto root = fresh_dir("longline");
  Workspace ws(root);
  // A two-byte character straddles the cap: the cut must not split it.
  const std::string long_line = std::string(99, 'x') + "\xc3\xa9" + std::string(200, 'y');
  ws.write("long.txt", "short\n" + long_line + "\nafter\n");
  auto read = ws.read("long.txt", 2, 10, 100);
  ASSERT_TRUE(std::holds_alternative<ReadResult>(read)) << error_of<ReadResult>(read);
  const auto& r = std::get<ReadResult>(read);
  EXPECT_EQ(r.content, std::string(99, 'x'));
  EXPECT_EQ(r.first_line, 2);
  EXPECT_EQ(r.last_line, 2);
  EXPECT_TRUE(r.truncated);
  EXPECT_NE(r.note.find("line 2 is 301 bytes"), std::string::npos) << r.note;
  // Paging from the start reaches the long line, then goes on past it.
  auto first = std::get<ReadResult>(ws.read("long.txt", 1, 10, 100));
  EXPECT_EQ(first.content, "short\n");
  EXPECT_EQ(first.last_line, 1);
  auto after = std::get<ReadResult>(ws.read("long.txt", r.last_line + 1, 10, 100));
  EXPECT_EQ(after.content, "after\n");
  EXPECT_TRUE(after.note.empty());
  fs::remove_all(root);
}

TEST(Workspace, ListShowsSymlinksAsLinksWithoutFollowingThem) {
  const auto root = fresh_dir("links");
  Workspace ws(root / "ws");
  fs::create_directories(root / "outside");
  { std::ofstream(root / "outside" / "secret.txt") << "12345678"; }
  fs::create_symlink(root / "outside", root / "ws" / "out_dir");
  fs::create_symlink(root / "outside" / "secret.txt", root / "ws" / "out_file");
  fs::create_symlink("loop_b", root / "ws" / "loop_a");
  fs::create_symlink("loop_a", root / "ws" / "loop_b");
  fs::create_symlink(".", root / "ws" / "self");
  ws.write("real.txt", "abc");
  auto listed = ws.list(".", 100);
  ASSERT_TRUE(std::holds_alternative<std::vector<d2k::agent::FileEntry>>(listed)) << error_of<int>(listed);
  const auto& entries = std::get<std::vector<d2k::agent::FileEntry>>(listed);
  std::vector<std::string> paths;
  for (const auto& e : entries) {
    paths.push_back(e.path);
    EXPECT_EQ(e.path.find("outside"), std::string::npos) << e.path;
    if (e.path != "real.txt") {
      EXPECT_EQ(e.kind, d2k::agent::EntryKind::link) << e.path;
      EXPECT_EQ(e.bytes, 0) << e.path;
    }
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"loop_a", "loop_b", "out_dir", "out_file", "real.txt", "self"}));
  // A loop is refused as a path, never an exception.
  EXPECT_FALSE(error_of<ReadResult>(ws.read("loop_a", 1, 10, 100)).empty());
  EXPECT_FALSE(error_of<int64_t>(ws.write("loop_a/x", "x")).empty());
  fs::remove_all(root);
}
