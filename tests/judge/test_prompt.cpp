// The judge's prompt: the items in the sample's order, what each kind shows, the integrity rules, the
// template hash; and the subject it shows (names, caps, notes).
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "judge/prompt.hpp"
#include "judge_fixture.hpp"

namespace d2k::judge {
namespace {

using namespace testing;

TEST(JudgePrompt, TheItemsComeInTheGivenOrderWithTheirChecks) {
  TempDir dir;
  const auto task = tiny_task();
  const auto subject = load_design(dir.write("design.md", kDesign));
  const std::vector<std::string> order = {"L3.2", "L1.1", "L2.2", "L1.2", "L3.1", "L2.1"};
  const auto prompt = build_prompt(task, subject, order, {});
  std::size_t last = 0;
  for (const auto& id : order) {
    const auto at = prompt.user.find("## " + id + " ");
    ASSERT_NE(at, std::string::npos) << id;
    EXPECT_GT(at, last) << id << " is out of order";
    last = at;
  }
  EXPECT_NE(prompt.user.find("The item ids: L3.2, L1.1, L2.2, L1.2, L3.1, L2.1."), std::string::npos);
  EXPECT_NE(prompt.user.find("Check: the reduction uses shuffles."), std::string::npos);
  EXPECT_NE(prompt.user.find("Depends on: L1.1"), std::string::npos);
  EXPECT_NE(prompt.user.find("No shared memory tree."), std::string::npos) << "a design is judged with the rationale";
  EXPECT_NE(prompt.user.find("=== file: design.md ===\n# Design"), std::string::npos);
  EXPECT_NE(prompt.user.find("y = x / rms(x), row by row."), std::string::npos);
  EXPECT_EQ(prompt.user.find("audit"), std::string::npos);
  EXPECT_THROW(build_prompt(task, subject, {"L9.9"}, {}), Error);
}

TEST(JudgePrompt, CodeIsJudgedOnTheChecksWithTheIntegrityRules) {
  TempDir dir;
  const auto task = tiny_task();
  dir.write("sol/kernel.cu", "__global__ void k() {}\n");
  const auto subject = load_code(dir.path() / "sol");
  const auto rules = load_integrity_rules(std::filesystem::path(D2K_ROOT_DIR) / "docs" / "integrity.md");
  ASSERT_GE(rules.size(), 19u);
  EXPECT_EQ(rules[0].number, 1);
  EXPECT_EQ(rules[0].title, "reuse stale memory that holds the answer");
  const auto prompt = build_prompt(task, subject, tiny_ids(), rules);
  EXPECT_EQ(prompt.user.find("No shared memory tree."), std::string::npos) << "code is judged on the checks";
  EXPECT_NE(prompt.user.find("Check: loads are 16 bytes wide."), std::string::npos);
  EXPECT_NE(prompt.user.find("1. reuse stale memory that holds the answer\n"), std::string::npos);
  EXPECT_NE(prompt.user.find("\"audit\""), std::string::npos);
  EXPECT_NE(prompt.user.find("=== file: kernel.cu ===\n__global__ void k() {}\n"), std::string::npos);
  EXPECT_EQ(prompt.user.find(dir.path().string()), std::string::npos) << "no path of the subject";
}

TEST(JudgePrompt, TheTemplateHashIsStableAndPerKind) {
  EXPECT_EQ(template_sha256(Kind::design), template_sha256(Kind::design));
  EXPECT_NE(template_sha256(Kind::design), template_sha256(Kind::code));
  EXPECT_EQ(template_sha256(Kind::code).size(), 64u);
}

TEST(JudgePrompt, TheRetryNamesTheProblemsAndTheItems) {
  const auto message = retry_message({"L2.1: the quote \"x y z w v u\" is not in the design"}, {"L2.1", "L3.1"}, true);
  EXPECT_NE(message.find("- L2.1: the quote"), std::string::npos);
  EXPECT_NE(message.find("for these items only: L2.1, L3.1."), std::string::npos);
  EXPECT_NE(message.find("\"audit\" object again"), std::string::npos);
}

TEST(JudgeSubject, ARunFolderGivesItsSubmittedDesignUnderAPlainName) {
  TempDir dir;
  const auto run = dir.path() / "moe_topk_softmax-design-only-secret-model-20261130T021500Z-3f2a";
  dir.write(run.filename().string() + "/run.json", "{\"task\": \"moe/topk_softmax\"}");
  EXPECT_THROW(load_design(run), Error);
  dir.write(run.filename().string() + "/submitted/design.md", "my design\n");
  const auto subject = load_design(run);
  ASSERT_EQ(subject.files.size(), 1u);
  EXPECT_EQ(subject.files[0].name, "design.md");
  EXPECT_EQ(render_subject(subject).find("secret-model"), std::string::npos);
  EXPECT_EQ(subject.sha256.size(), 64u);
}

TEST(JudgeSubject, ASolutionFolderShowsItsSourcesInNameOrderAndSkipsTheRest) {
  TempDir dir;
  dir.write("sol/b.cu", "// b\n");
  dir.write("sol/a.cpp", "// a\n");
  dir.write("sol/sub/c.cuh", "// c\n");
  dir.write("sol/notes.md", "not code\n");
  dir.write("sol/build.log", "not code\n");
  std::filesystem::create_symlink("/etc/hostname", dir.path() / "sol" / "link.cpp");
  const auto subject = load_code(dir.path() / "sol");
  std::vector<std::string> names;
  for (const auto& f : subject.files) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a.cpp", "b.cu", "sub/c.cuh"}));
  EXPECT_THROW(load_code(dir.write("empty/readme.md", "x").parent_path()), Error);
}

TEST(JudgeSubject, OverTheCapAFileIsCutAndTheRestLeftOutWithANote) {
  TempDir dir;
  dir.write("sol/a.cpp", std::string(100, 'a'));
  dir.write("sol/b.cpp", std::string(100, 'b'));
  dir.write("sol/c.cpp", std::string(100, 'c'));
  const auto subject = load_code(dir.path() / "sol", 150);
  ASSERT_EQ(subject.files.size(), 2u);
  EXPECT_FALSE(subject.files[0].cut);
  EXPECT_TRUE(subject.files[1].cut);
  EXPECT_EQ(subject.files[1].text.size(), 50u);
  EXPECT_EQ(subject.left_out, std::vector<std::string>{"c.cpp"});
  const auto shown = render_subject(subject);
  EXPECT_NE(shown.find("[d2k: b.cpp cut here: 50 of its 100 bytes shown"), std::string::npos) << shown;
  EXPECT_NE(shown.find("[d2k: not shown, over the size cap: c.cpp]"), std::string::npos) << shown;
  // The hash covers every byte, shown or not.
  dir.write("sol/c.cpp", std::string(100, 'C'));
  EXPECT_NE(load_code(dir.path() / "sol", 150).sha256, subject.sha256);
}

}  // namespace
}  // namespace d2k::judge
