#include <gtest/gtest.h>

#include <fstream>

#include "agent/prompt.hpp"
#include "agent/tools.hpp"
#include "core/task_loader.hpp"

using namespace d2k;
using namespace d2k::agent;

namespace {

PromptInputs inputs_for(const Task& task, Condition condition) {
  PromptInputs in;
  in.task = &task;
  for (const auto& w : task.workloads)
    if (!w.hidden) in.workloads.push_back(&w);
  in.condition = condition;
  in.device = Device::cuda;
  in.device_name = "NVIDIA H200";
  in.ceiling.copy_gbps = 4000;
  in.ceiling.bf16_tflops = 800;
  in.tools = tool_specs(condition);
  in.root = D2K_ROOT_DIR;
  return in;
}

}  // namespace

TEST(Prompt, PairedConditionsDifferOnlyInTheGuidanceBlock) {
  for (const auto& task : load_tasks(std::filesystem::path(D2K_ROOT_DIR) / "tasks")) {
    const auto none = build_prompt(inputs_for(task, Condition::none));
    EXPECT_TRUE(none.guidance.empty());
    std::string previous;
    for (auto condition : {Condition::L1, Condition::L1_L2, Condition::L1_L2_L3}) {
      const auto p = build_prompt(inputs_for(task, condition));
      EXPECT_EQ(p.system, none.system) << task.name;
      ASSERT_FALSE(p.guidance.empty()) << task.name;
      const auto at = p.user.find(p.guidance);
      ASSERT_NE(at, std::string::npos);
      EXPECT_EQ(p.user.substr(0, at) + p.user.substr(at + p.guidance.size()), none.user) << task.name;
      // Each level adds to the one below it.
      EXPECT_GT(p.guidance.size(), previous.size());
      previous = p.guidance;
    }
    // The guidance of L1 has only L1 items, L1+L2+L3 every item.
    const auto l1 = build_prompt(inputs_for(task, Condition::L1)).guidance;
    const auto all = build_prompt(inputs_for(task, Condition::L1_L2_L3)).guidance;
    for (const auto& item : task.guidance.items) {
      EXPECT_NE(all.find(item.id), std::string::npos) << item.id;
      EXPECT_EQ(l1.find("### " + item.id + " ") != std::string::npos, item.level == 1) << item.id;
    }
  }
}

TEST(Prompt, ShowsWhatAKernelWriterNeedsAndNoHiddenWorkload) {
  for (const auto& task : load_tasks(std::filesystem::path(D2K_ROOT_DIR) / "tasks")) {
    const auto p = build_prompt(inputs_for(task, Condition::none));
    EXPECT_NE(p.user.find("D2K_REGISTER_TASK"), std::string::npos) << "the reference code";
    EXPECT_NE(p.user.find("d2k_run"), std::string::npos) << "the ABI";
    EXPECT_NE(p.user.find("2.0f * in[i]"), std::string::npos) << "the minimal example";
    EXPECT_NE(p.user.find("NVIDIA H200"), std::string::npos);
    EXPECT_NE(p.user.find("4000 GB/s"), std::string::npos);
    EXPECT_NE(p.system.find("350 turns"), std::string::npos);
    for (const auto& tool : tool_specs(Condition::none)) EXPECT_NE(p.system.find("`" + tool.name + "`"), std::string::npos);
    for (const auto& w : task.workloads) {
      if (w.hidden) EXPECT_EQ(p.user.find(w.name), std::string::npos) << w.name;
      else EXPECT_NE(p.user.find(w.name), std::string::npos) << w.name;
    }
    for (const auto& output : task.outputs) EXPECT_NE(p.user.find("`" + output.name + "`"), std::string::npos);
  }
}

TEST(Prompt, DesignOnlyAsksForADesignAndNoCode) {
  const auto tasks = load_tasks(std::filesystem::path(D2K_ROOT_DIR) / "tasks");
  const auto p = build_prompt(inputs_for(tasks.front(), Condition::design_only));
  EXPECT_TRUE(p.guidance.empty());
  EXPECT_NE(p.user.find("design.md"), std::string::npos);
  EXPECT_NE(p.user.find("## L3 execution"), std::string::npos);
  EXPECT_EQ(p.system.find("`compile`"), std::string::npos);
  EXPECT_EQ(p.user.find("d2k_run"), std::string::npos);
  std::vector<std::string> names;
  for (const auto& t : tool_specs(Condition::design_only)) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"list_files", "read_file", "write_file", "edit_file", "submit"}));
}

TEST(Prompt, OffersTheCutlassHeadersByTheirReleaseWhereACudaSolutionHasThem) {
  const auto tasks = load_tasks(std::filesystem::path(D2K_ROOT_DIR) / "tasks");
  ASSERT_FALSE(tasks.empty());
  PromptInputs in = inputs_for(tasks.front(), Condition::none);
  EXPECT_EQ(build_prompt(in).user.find("CUTLASS"), std::string::npos) << "no headers, no offer";
  // A folder laid out like CUTLASS's include/, with its version header.
  const auto dir = std::filesystem::path(testing::TempDir()) / "prompt-cutlass" / "include";
  std::filesystem::create_directories(dir / "cutlass");
  std::filesystem::create_directories(dir / "cute");
  std::ofstream(dir / "cutlass" / "version.h") << "#pragma once\n#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR 2\n"
                                                  "#define CUTLASS_PATCH 0 \n";
  in.cutlass_include_dir = dir;
  const auto user = build_prompt(in).user;
  EXPECT_NE(user.find("The CUTLASS 4.2.0 and CuTe headers are on the include path"), std::string::npos) << user;
  EXPECT_NE(user.find("no library may be called at run time"), std::string::npos);
  // Host C++ solutions never see them.
  in.device = Device::cpu;
  EXPECT_EQ(build_prompt(in).user.find("CUTLASS"), std::string::npos);
}
