// `d2k tasks --check` as a function: the complete test task passes; a scaffolded task, broken copies of
// tasks and an empty folder give the problems they should, each naming the file and the field.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/scaffold.hpp"
#include "eval/task_check.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;

const fs::path kTestTasks = fs::path(D2K_TEST_DATA) / "core" / "data" / "tasks";
const fs::path kTasks = fs::path(D2K_ROOT_DIR) / "tasks";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Replaces the one occurrence of `from` in `file`.
void edit(const fs::path& file, const std::string& from, const std::string& to) {
  std::string text = read_text(file);
  const auto at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  ASSERT_EQ(text.find(from, at + 1), std::string::npos) << "ambiguous edit: " << from;
  std::ofstream(file, std::ios::binary) << text.replace(at, from.size(), to);
}

// A fresh tasks root, removed afterwards; tasks are copied or scaffolded into it.
class Root {
 public:
  Root() {
    static int counter = 0;
    root_ = fs::temp_directory_path() / fmt::format("d2k-test-task-check-{}-{}", ::getpid(), counter++);
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~Root() { fs::remove_all(root_); }
  const fs::path& path() const { return root_; }
  fs::path copy(const fs::path& from, const std::string& name) const {
    fs::create_directories((root_ / name).parent_path());
    fs::copy(from, root_ / name, fs::copy_options::recursive);
    return root_ / name;
  }

 private:
  fs::path root_;
};

std::string joined(const std::vector<std::string>& problems) {
  std::string text;
  for (const auto& p : problems) text += p + "\n";
  return text;
}

// Every fragment appears in some problem line.
void expect_problems(const std::vector<std::string>& problems, const std::vector<std::string>& fragments) {
  for (const auto& fragment : fragments) {
    const bool found = std::any_of(problems.begin(), problems.end(),
                                   [&](const std::string& p) { return p.find(fragment) != std::string::npos; });
    EXPECT_TRUE(found) << "no problem says '" << fragment << "' in:\n" << joined(problems);
  }
}

TEST(TaskCheck, TheCompleteTestTaskAndTheShippedTasksPass) {
  EXPECT_EQ(joined(check_task(kTestTasks / "demo" / "batched_matmul", kTestTasks)), "");
  for (const auto& dir : task_folders(kTasks)) EXPECT_EQ(joined(check_task(dir, kTasks)), "") << dir;
}

TEST(TaskCheck, AScaffoldedTaskListsEverythingLeftToDo) {
  Root root;
  const fs::path dir = scaffold_task(root.path(), "demo/fresh");
  const auto problems = check_task(dir, root.path());
  const std::string toml = (dir / "task.toml").string();
  expect_problems(problems, {
      toml + ": summary = \"TODO: one line on what fresh computes (dtypes)\": still the scaffold's placeholder",
      toml + ": source = \"TODO",
      toml + ": baseline = \"TODO",
      toml + ": description = \"TODO: what is computed, exactly.\"",
      toml + ": workloads[0].name = \"TODO-model-T7\"",
      toml + ": workloads[2].model = \"TODO",
      (dir / "guidance.md").string() + ": L1.1: still the scaffold's placeholder",
      (dir / "guidance.md").string() + ": L3.3: still the scaffold's placeholder",
      (dir / "reference.cpp").string() + ": D2K_REGISTER_TASK: no reference code is registered as 'demo/fresh'",
      (dir / "solution" / "cuda" / "fresh.cu").string() + ": still the stub d2k new-task wrote",
      (dir / "solution" / "cpu" / "fresh.cpp").string() + ": still the stub d2k new-task wrote",
      (dir / "notes.md").string() + ": ## The floor: still the scaffold's placeholder",
      (dir / "notes.md").string() + ": ## Where the bar is missed: still the scaffold's placeholder",
  });
  // It has its smoke and hidden workloads and three items per level already.
  for (const auto& p : problems) {
    EXPECT_EQ(p.find("no smoke workload"), std::string::npos) << p;
    EXPECT_EQ(p.find("no hidden workload"), std::string::npos) << p;
    EXPECT_EQ(p.find("per level"), std::string::npos) << p;
  }
  EXPECT_EQ(problems.size(), 4u + 6u + 9u + 1u + 2u + 9u) << joined(problems);
}

TEST(TaskCheck, ABrokenTaskTomlIsOneProblemNamingFileLineAndFieldAndTheRestIsStillChecked) {
  Root root;
  const fs::path dir = root.copy(kTestTasks / "demo" / "batched_matmul", "demo/batched_matmul");
  edit(dir / "task.toml", "smoke = true", "smoke = \"yes\"");
  fs::remove(dir / "notes.md");
  const auto problems = check_task(dir, root.path());
  ASSERT_EQ(problems.size(), 2u) << joined(problems);
  EXPECT_EQ(problems[0].rfind((dir / "task.toml").string() + ":", 0), 0u) << problems[0];
  EXPECT_NE(problems[0].find(": workloads[0].smoke = \"yes\": must be true or false"), std::string::npos) << problems[0];
  EXPECT_EQ(problems[1], (dir / "notes.md").string() + ": missing: the kernel notes (the floor, versions, measurements, profile)");
}

TEST(TaskCheck, TiersGuidanceAndFormulas) {
  Root root;
  const fs::path dir = root.copy(kTestTasks / "demo" / "batched_matmul", "demo/batched_matmul");
  const std::string toml = (dir / "task.toml").string();
  edit(dir / "task.toml", "smoke = true\n", "");
  edit(dir / "task.toml", "hidden = true\n", "");
  edit(dir / "task.toml", "min_bytes = \"4 * B * (M * K + K * N + M * N)\"", "min_bytes = \"4 * B * (M * K + K * N + M * N) * (B - 3)\"");
  const std::string guidance = read_text(dir / "guidance.md");
  std::ofstream(dir / "guidance.md", std::ios::binary) << guidance.substr(0, guidance.find("## L3.3"));
  const auto problems = check_task(dir, root.path());
  expect_problems(problems, {
      toml + ": workloads: no smoke workload (smoke = true, not hidden)",
      toml + ": workloads: no hidden workload (hidden = true)",
      toml + ": min_bytes: gives 0 for workload 'tiny-B3'",
      (dir / "guidance.md").string() + ": L3: 2 items; a task needs at least 3 per level",
  });
  EXPECT_EQ(problems.size(), 4u) << joined(problems);
}

TEST(TaskCheck, TheReferenceRunsOnTheSmokeWorkloadWithTheDeclaredShapes) {
  Root root;
  const fs::path dir = root.copy(kTestTasks / "demo" / "batched_matmul", "demo/batched_matmul");
  edit(dir / "task.toml", "shape = [\"B\", \"M\", \"N\"]", "shape = [\"B\", \"N\", \"M\"]");
  const auto problems = check_task(dir, root.path());
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_EQ(problems[0], (dir / "reference.cpp").string() +
                             ": reference: output 'c' has shape [3, 5, 9] on workload 'tiny-B3'; task.toml says [3, 9, 5]");
}

TEST(TaskCheck, TheLibraryPathAndTheLibraryFieldGoTogether) {
  Root root;
  // The registered code of demo/batched_matmul has a library path; the scaffold's task.toml names none
  // (and its inputs are not the ones that code reads, so the reference fails on the smoke workload).
  const fs::path scaffolded = scaffold_task(root.path(), "demo/batched_matmul");
  expect_problems(check_task(scaffolded, root.path()),
                  {(scaffolded / "task.toml").string() + ": library: missing: reference.cpp defines a library path",
                   (scaffolded / "reference.cpp").string() + ": reference: fails on the smoke workload 'TODO-model-T7' on the cpu device"});

  // norm/fused_add_rmsnorm has none, so task.toml must not name one.
  const fs::path norm = root.copy(kTasks / "norm" / "fused_add_rmsnorm", "norm/fused_add_rmsnorm");
  edit(norm / "task.toml", "description = ", "library = \"torch.rms_norm\"\ndescription = ");
  const auto problems = check_task(norm, root.path());
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_EQ(problems[0], (norm / "task.toml").string() +
                             ": library = \"torch.rms_norm\": reference.cpp defines no library path (TaskCode::library)");
}

TEST(TaskCheck, AnEmptyFolderMissesEveryFile) {
  Root root;
  fs::create_directories(root.path() / "demo" / "empty");
  const fs::path dir = root.path() / "demo" / "empty";
  expect_problems(check_task(dir, root.path()), {
      (dir / "task.toml").string() + ": missing",
      (dir / "guidance.md").string() + ": cannot read",
      (dir / "reference.cpp").string() + ": missing",
      (dir / "solution" / "cuda").string() + ": missing",
      (dir / "solution" / "cpu").string() + ": missing",
      (dir / "notes.md").string() + ": missing",
  });
}

TEST(TaskCheck, TaskFoldersAreEveryFamilyAndNameSorted) {
  Root root;
  fs::create_directories(root.path() / "b" / "two");
  fs::create_directories(root.path() / "a" / "one");
  std::ofstream(root.path() / "README.md") << "not a family";
  EXPECT_EQ(task_folders(root.path()), (std::vector<fs::path>{root.path() / "a" / "one", root.path() / "b" / "two"}));
}

}  // namespace
}  // namespace d2k
