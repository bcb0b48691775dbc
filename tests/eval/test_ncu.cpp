#include "eval/ncu.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

namespace d2k {
namespace {

namespace fs = std::filesystem;

// PATH set to one folder for the test's length, restored after.
class PathIs {
 public:
  explicit PathIs(const fs::path& folder) {
    if (const char* old = std::getenv("PATH")) old_ = old;
    ::setenv("PATH", folder.c_str(), 1);
  }
  ~PathIs() { ::setenv("PATH", old_.c_str(), 1); }

 private:
  std::string old_;
};

fs::path fresh_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("d2k-test-ncu-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A toolkit-style layout: <install>/bin/ncu reached through a link in another folder on PATH.
TEST(Ncu, FoundOnPathWithItsInstallationReadOnlyAndItsOptions) {
  const auto root = fresh_dir("found");
  fs::create_directories(root / "cuda-13.0/bin");
  fs::create_directories(root / "path");
  { std::ofstream(root / "cuda-13.0/bin/ncu") << "#!/bin/sh\n"; }
  fs::permissions(root / "cuda-13.0/bin/ncu", fs::perms::owner_all);
  fs::create_symlink(root / "cuda-13.0/bin/ncu", root / "path/ncu");
  PathIs path(root / "path");
  const auto wrap = make_ncu_wrap("a.sum,b.pct", 7, root / "report.txt");
  ASSERT_TRUE(wrap);
  EXPECT_EQ(wrap->ncu, root / "path/ncu");
  EXPECT_EQ(wrap->report, root / "report.txt");
  const auto& args = wrap->args;
  auto after = [&](const std::string& option) {
    auto it = std::find(args.begin(), args.end(), option);
    return it != args.end() && it + 1 != args.end() ? *(it + 1) : std::string("(missing)");
  };
  EXPECT_EQ(after("--launch-count"), "7");
  EXPECT_EQ(after("--metrics"), "a.sum,b.pct");
  EXPECT_NE(std::find(args.begin(), args.end(), "--csv"), args.end());
  // The installation the link resolves to, and the link's own folder.
  EXPECT_NE(std::find(wrap->read.begin(), wrap->read.end(), fs::canonical(root / "cuda-13.0")), wrap->read.end());
  EXPECT_NE(std::find(wrap->read.begin(), wrap->read.end(), root / "path"), wrap->read.end());
  fs::remove_all(root);
}

TEST(Ncu, NotOnPathIsNothing) {
  const auto root = fresh_dir("absent");
  PathIs path(root);
  EXPECT_FALSE(find_on_path("ncu"));
  EXPECT_FALSE(make_ncu_wrap("a.sum", 1, root / "report.txt"));
  fs::remove_all(root);
}

}  // namespace
}  // namespace d2k
