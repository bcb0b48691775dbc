// The prompt of a run: a system prompt and the first user message. Everything a kernel writer needs
// (the task, the reference, the ABI of the run's language (C ABI or Triton launcher), a minimal example, the published workloads, the device, the
// tools, the budget) and, under a guidance condition, the expert's design items of those levels. For
// the four code conditions the guidance block is the only difference: paired runs see the same text.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "agent/budget.hpp"
#include "agent/condition.hpp"
#include "core/metrics.hpp"
#include "core/task.hpp"
#include "llm/chat.hpp"
#include "runner/builder.hpp"

namespace d2k::agent {

struct PromptInputs {
  const Task* task = nullptr;
  std::vector<const Workload*> workloads;  // the published ones the run checks and times
  Condition condition = Condition::none;
  // cuda: the C ABI and examples/minimal/scale.cpp; triton: the Triton launcher interface and
  // examples/minimal/scale.py (the cuda device only).
  Language language = Language::cuda;
  Device device = Device::cpu;
  std::string device_name;
  Ceilings ceiling;
  Budget budget;
  std::vector<llm::ToolSpec> tools;
  std::filesystem::path root;  // holds include/d2k/solution.h and examples/minimal
  // The CUTLASS/CuTe headers cuda solutions compile with (runner/builder.hpp cutlass_include_dir); empty
  // where there are none, and the prompt then does not offer them.
  std::filesystem::path cutlass_include_dir;
};

struct Prompt {
  std::string system;
  std::string user;
  std::string guidance;  // the block inside `user` that the condition adds; empty for none and design-only
};

Prompt build_prompt(const PromptInputs& inputs);

// The task part of the prompt alone (description, interface, workloads): also written to the
// workspace as TASK.md so that the model can read it again after its context has moved on.
std::string task_sheet(const Task& task, const std::vector<const Workload*>& workloads);

}  // namespace d2k::agent
