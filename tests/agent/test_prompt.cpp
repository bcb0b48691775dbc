#include <gtest/gtest.h>

#include <fstream>

#include "agent/prompt.hpp"
#include "agent/run_types.hpp"
#include "core/error.hpp"
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

TEST(Prompt, TritonShowsTheLauncherInterfaceAndItsExampleNotTheCAbi) {
  for (const auto& task : load_tasks(std::filesystem::path(D2K_ROOT_DIR) / "tasks")) {
    PromptInputs in = inputs_for(task, Condition::none);
    in.language = Language::triton;
    in.tools = tool_specs(Condition::none, Language::triton);
    const auto p = build_prompt(in);
    EXPECT_NE(p.system.find("write a kernel in Triton"), std::string::npos);
    EXPECT_NE(p.user.find("## The solution interface (Triton)"), std::string::npos);
    EXPECT_NE(p.user.find("run with Triton 3.6.0 on the cuda device (sm_90a)"), std::string::npos);
    EXPECT_NE(p.user.find("`launch(<inputs>, <outputs not in place>, <scalars>, workspace)`"), std::string::npos);
    EXPECT_NE(p.user.find("mark it `do_not_specialize`"), std::string::npos);
    EXPECT_NE(p.user.find("```python\n"), std::string::npos) << "the minimal example";
    EXPECT_NE(p.user.find("def launch(x, y, workspace):"), std::string::npos) << "the minimal example";
    EXPECT_NE(p.user.find("Write your solution as Triton in `solution.py`"), std::string::npos);
    EXPECT_NE(p.user.find("D2K_REGISTER_TASK"), std::string::npos) << "the reference is the same";
    // Nothing of the C ABI, the CUDA C++ build or CUTLASS.
    EXPECT_EQ(p.user.find("d2k_run"), std::string::npos);
    EXPECT_EQ(p.user.find("2.0f * in[i]"), std::string::npos);
    EXPECT_EQ(p.user.find("nvcc"), std::string::npos);
    EXPECT_EQ(p.user.find("CUTLASS"), std::string::npos);
    for (const auto& input : task.inputs) EXPECT_NE(p.user.find("`" + input.name + "`"), std::string::npos);
    // The guidance block is the only difference between paired Triton runs too.
    PromptInputs l1 = in;
    l1.condition = Condition::L1;
    const auto g = build_prompt(l1);
    const auto at = g.user.find(g.guidance);
    ASSERT_NE(at, std::string::npos);
    EXPECT_EQ(g.user.substr(0, at) + g.user.substr(at + g.guidance.size()), p.user) << task.name;
  }
}

TEST(Prompt, CudaShowsTheCAbiAndNoTriton) {
  const auto tasks = load_tasks(std::filesystem::path(D2K_ROOT_DIR) / "tasks");
  for (auto device : {Device::cuda, Device::cpu}) {
    PromptInputs in = inputs_for(tasks.front(), Condition::none);
    in.device = device;
    in.language = Language::cuda;
    const auto p = build_prompt(in);
    EXPECT_NE(p.user.find("## The solution ABI"), std::string::npos);
    EXPECT_NE(p.user.find("d2k_run"), std::string::npos);
    EXPECT_NE(p.user.find(device == Device::cuda ? "Solutions are CUDA C++" : "Solutions are host C++"), std::string::npos);
    EXPECT_EQ(p.user.find("Triton"), std::string::npos);
    EXPECT_EQ(p.system.find("Triton"), std::string::npos);
  }
}

TEST(Prompt, TritonOnTheCpuDeviceIsRefused) {
  const auto tasks = load_tasks(std::filesystem::path(D2K_ROOT_DIR) / "tasks");
  PromptInputs in = inputs_for(tasks.front(), Condition::none);
  in.device = Device::cpu;
  in.language = Language::triton;
  try {
    build_prompt(in);
    FAIL() << "a Triton prompt for the cpu device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the cpu device has no Triton backend"), std::string::npos) << e.what();
  }
  EXPECT_EQ(language_refusal(Language::triton, Device::cuda), std::nullopt);
  EXPECT_EQ(language_refusal(Language::cuda, Device::cpu), std::nullopt);
  const auto why = language_refusal(Language::triton, Device::cpu).value_or("");
  EXPECT_NE(why.find("--language triton with --device cpu: the cpu device has no Triton backend"), std::string::npos) << why;
  EXPECT_EQ(parse_run_language("triton"), Language::triton);
  EXPECT_EQ(parse_run_language("cuda"), Language::cuda);
  EXPECT_EQ(parse_run_language("cpp"), std::nullopt);
  EXPECT_EQ(parse_run_language("Triton"), std::nullopt);
}
