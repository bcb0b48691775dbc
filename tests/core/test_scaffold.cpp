// `d2k new-task` as a function: the folder it writes loads as a task with every field of the format,
// carries its placeholders where `d2k tasks --check` looks for them, and nothing is written for a bad
// name or an existing folder.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/scaffold.hpp"
#include "core/task_loader.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class ScaffoldRoot : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / fmt::format("d2k-test-scaffold-{}", ::getpid());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string error_of(const std::string& name) {
    try {
      scaffold_task(root_, name);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
  fs::path root_;
};

TEST_F(ScaffoldRoot, WritesEveryFileOfATask) {
  const fs::path dir = scaffold_task(root_, "attn/paged_decode");
  EXPECT_EQ(dir, root_ / "attn" / "paged_decode");
  for (const char* file : {"task.toml", "reference.cpp", "guidance.md", "solution/cuda/paged_decode.cu",
                           "solution/cpu/paged_decode.cpp", "notes.md"}) {
    EXPECT_TRUE(fs::is_regular_file(dir / file)) << file;
  }
  EXPECT_NE(read_text(dir / "reference.cpp").find("D2K_REGISTER_TASK(Reference);"), std::string::npos);
  for (const char* stub : {"solution/cuda/paged_decode.cu", "solution/cpu/paged_decode.cpp", "reference.cpp"}) {
    const std::string text = read_text(dir / stub);
    EXPECT_NE(text.find(std::string("attn/paged_decode: ")), std::string::npos) << stub;
    EXPECT_NE(text.find(kNotWrittenYet), std::string::npos) << stub;
  }
  const std::string notes = read_text(dir / "notes.md");
  for (const char* section : {"## The floor", "## Prediction", "## Versions", "## Measured", "## Profile",
                              "## Library path and published figures", "## Where the bar is missed"}) {
    EXPECT_NE(notes.find(section), std::string::npos) << section;
  }
}

TEST_F(ScaffoldRoot, TheTaskLoadsWithEveryFieldPresentAndPlaceholdersLeft) {
  const fs::path dir = scaffold_task(root_, "attn/paged_decode");
  const Task task = load_task(dir, root_);
  EXPECT_EQ(task.name, "attn/paged_decode");
  EXPECT_NE(task.summary.find(kPlaceholder), std::string::npos);
  EXPECT_NE(task.source.find(kPlaceholder), std::string::npos);
  EXPECT_NE(task.description.find(kPlaceholder), std::string::npos);
  EXPECT_TRUE(task.library.empty()) << "commented out until reference.cpp defines a library path";
  ASSERT_EQ(task.inputs.size(), 1u);
  EXPECT_FALSE(task.inputs[0].prepare);
  EXPECT_TRUE(task.inputs[0].perturb);
  ASSERT_EQ(task.workloads.size(), 3u);
  EXPECT_TRUE(task.workloads[0].smoke);
  EXPECT_TRUE(task.workloads[2].hidden);
  ASSERT_EQ(task.guidance.items.size(), 9u);
  EXPECT_EQ(task.guidance.items[3].id, "L2.1");
  EXPECT_EQ(task.guidance.items[3].depends_on, (std::vector<std::string>{"L1.1"}));
  EXPECT_NE(task.guidance.items[3].rationale.find("L2 dataflow"), std::string::npos);
  // Every key the format knows is in the file, commented out where it is optional.
  const std::string toml = read_text(dir / "task.toml");
  for (const char* key : {"summary =", "source =", "baseline =", "# library =", "description =", "axes =", "flops =",
                          "min_bytes =", "flops_dtype =", "deterministic =", "name =", "dtype =", "shape =",
                          "# strides =", "# layouts.", "init =", "prepare =", "perturb =", "inplace =", "tolerance =",
                          "# [compare.", "[[scalars]]", "type =", "value =", "model =", "smoke =", "hidden =",
                          "# scalars =", "# layouts =", "# inits ="}) {
    EXPECT_NE(toml.find(key), std::string::npos) << key;
  }
}

TEST_F(ScaffoldRoot, RefusesABadNameAndAnExistingFolderWritingNothing) {
  for (const char* name : {"paged_decode", "attn/", "/paged", "Attn/paged", "attn/paged-decode", "attn/2d", "a/b/c",
                           "attn/paged decode", "../x"}) {
    EXPECT_NE(error_of(name).find(fmt::format("'{}' is not a task name: <family>/<name>", name)), std::string::npos)
        << name << ": " << error_of(name);
  }
  EXPECT_TRUE(fs::is_empty(root_));
  fs::create_directories(root_ / "attn" / "paged");
  std::ofstream(root_ / "attn" / "paged" / "mine.txt") << "keep";
  EXPECT_NE(error_of("attn/paged").find((root_ / "attn" / "paged").string() + ": already exists"), std::string::npos);
  EXPECT_EQ(read_text(root_ / "attn" / "paged" / "mine.txt"), "keep");
  EXPECT_FALSE(fs::exists(root_ / "attn" / "paged" / "task.toml"));
}

}  // namespace
}  // namespace d2k
