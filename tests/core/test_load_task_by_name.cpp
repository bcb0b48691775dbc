// load_task(tasks_root, name): one task read by its name, the others not read at all.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "core/error.hpp"
#include "core/task_loader.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;

const fs::path kTasks = fs::path(D2K_TEST_DATA) / "core" / "data" / "tasks";

// A tasks root holding the fixture demo/rms_add and a broken task broken/garbage, removed afterwards.
class RootWithABrokenTask {
 public:
  RootWithABrokenTask() {
    root_ = fs::temp_directory_path() / fmt::format("d2k-test-load-by-name-{}", ::getpid());
    fs::remove_all(root_);
    fs::create_directories(root_ / "demo");
    fs::copy(kTasks / "demo" / "rms_add", root_ / "demo" / "rms_add", fs::copy_options::recursive);
    fs::create_directories(root_ / "broken" / "garbage");
    std::ofstream(root_ / "broken" / "garbage" / "task.toml") << "this is = not [ toml\n";
  }
  ~RootWithABrokenTask() { fs::remove_all(root_); }
  const fs::path& root() const { return root_; }

 private:
  fs::path root_;
};

std::string error_of(const fs::path& root, const std::string& name) {
  try {
    load_task(root, name);
  } catch (const Error& error) {
    return error.what();
  }
  return "(loaded)";
}

TEST(LoadTaskByName, ReadsOnlyTheNamedTask) {
  RootWithABrokenTask tasks;
  EXPECT_THROW(load_tasks(tasks.root()), Error);  // the broken task is there to be read
  const Task task = load_task(tasks.root(), std::string("demo/rms_add"));
  EXPECT_EQ(task.name, "demo/rms_add");
  EXPECT_EQ(task.dir, tasks.root() / "demo" / "rms_add");
  EXPECT_FALSE(task.workloads.empty());
}

TEST(LoadTaskByName, AnUnknownNameListsTheKnownTasksWithoutReadingThem) {
  RootWithABrokenTask tasks;
  EXPECT_EQ(error_of(tasks.root(), "demo/nope"), "no task 'demo/nope' (known: broken/garbage, demo/rms_add)");
}

TEST(LoadTaskByName, ANameThatIsNotFamilySlashNameIsUnknown) {
  RootWithABrokenTask tasks;
  for (const std::string name : {"demo", "demo/rms_add/solution", "../tasks/demo", "demo/../demo/rms_add", "/demo/rms_add",
                                 "", "./demo"}) {
    EXPECT_EQ(error_of(tasks.root(), name).rfind("no task '" + name + "' (known: ", 0), 0u) << name;
  }
}

}  // namespace
}  // namespace d2k
