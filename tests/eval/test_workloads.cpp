#include <gtest/gtest.h>

#include "core/error.hpp"
#include "eval/workloads.hpp"

namespace d2k {
namespace {

Task task_with_hidden() {
  Task task;
  task.name = "test/select";
  task.workloads = {Workload{.name = "shown-a"}, Workload{.name = "secret", .hidden = true}, Workload{.name = "shown-b"}};
  return task;
}

std::vector<std::string> names(const std::vector<const Workload*>& workloads) {
  std::vector<std::string> out;
  for (const auto* w : workloads) out.push_back(w->name);
  return out;
}

TEST(SelectWorkloads, HiddenOnesOnlyInFinalEvaluations) {
  const auto task = task_with_hidden();
  EXPECT_EQ(names(select_workloads(task, {}, false)), (std::vector<std::string>{"shown-a", "shown-b"}));
  EXPECT_EQ(names(select_workloads(task, {}, true)), (std::vector<std::string>{"shown-a", "secret", "shown-b"}));
  EXPECT_EQ(names(select_workloads(task, {"secret"}, true)), (std::vector<std::string>{"secret"}));
}

TEST(SelectWorkloads, AHiddenNameIsUnknownOutsideFinalAndIsNotListed) {
  const auto task = task_with_hidden();
  try {
    select_workloads(task, {"secret"}, false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("no workload 'secret'"), std::string::npos) << message;
    EXPECT_NE(message.find("shown-a, shown-b"), std::string::npos) << message;
    EXPECT_EQ(message.find("secret", message.find("has:")), std::string::npos) << message;
  }
}

// A task with a smoke tier: one published smoke workload, one hidden one, two others.
Task task_with_smoke() {
  Task task;
  task.name = "test/smoke";
  task.dir = "tasks/test/smoke";
  task.workloads = {Workload{.name = "big"}, Workload{.name = "tiny", .smoke = true},
                    Workload{.name = "secret-tiny", .hidden = true, .smoke = true}, Workload{.name = "secret", .hidden = true}};
  return task;
}

TEST(SelectWorkloads, TheCpuDeviceDefaultsToTheSmokeTierOnlyWhenNothingIsNamed) {
  EXPECT_EQ(default_tier(Device::cpu, {}), WorkloadTier::smoke);
  EXPECT_EQ(default_tier(Device::cpu, {"big"}), WorkloadTier::all);
  EXPECT_EQ(default_tier(Device::cuda, {}), WorkloadTier::all);
}

TEST(SelectWorkloads, TheSmokeTierKeepsTheSmokeWorkloadsTheCallerMaySee) {
  const auto task = task_with_smoke();
  EXPECT_EQ(names(select_workloads(task, {}, false, WorkloadTier::smoke)), (std::vector<std::string>{"tiny"}));
  EXPECT_EQ(names(select_workloads(task, {}, true, WorkloadTier::smoke)), (std::vector<std::string>{"tiny", "secret-tiny"}));
  EXPECT_EQ(names(select_workloads(task, {}, true, WorkloadTier::all)),
            (std::vector<std::string>{"big", "tiny", "secret-tiny", "secret"}));
  // A named workload runs whatever the tier.
  EXPECT_EQ(names(select_workloads(task, {"big"}, false, WorkloadTier::smoke)), (std::vector<std::string>{"big"}));
}

TEST(SelectWorkloads, ASmokeTierThatSelectsNothingIsAnErrorNamingTheFile) {
  auto task = task_with_smoke();
  task.workloads[1].smoke = false;
  try {
    select_workloads(task, {}, false, WorkloadTier::smoke);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("task test/smoke has no smoke workload (smoke = true in tasks/test/smoke/task.toml)"),
              std::string::npos) << message;
    EXPECT_NE(message.find("--workload"), std::string::npos) << message;
  }
}

TEST(SelectWorkloads, TheSmokeNoteCountsEveryTaskOnce) {
  const auto a = task_with_smoke();
  auto b = task_with_smoke();
  b.workloads.resize(2);
  EXPECT_EQ(smoke_tier_note({&a, &b}, {}, false, WorkloadTier::smoke), "cpu device: the smoke workloads (2 of 4)");
  EXPECT_EQ(smoke_tier_note({&a, &b}, {}, true, WorkloadTier::smoke), "cpu device: the smoke workloads (3 of 6)");
  EXPECT_EQ(smoke_tier_note({&a}, {}, false, WorkloadTier::all), std::nullopt);
  EXPECT_EQ(smoke_tier_note({&a}, {"big"}, false, WorkloadTier::smoke), std::nullopt);
  Task only_smoke;
  only_smoke.workloads = {Workload{.name = "tiny", .smoke = true}};
  EXPECT_EQ(smoke_tier_note({&only_smoke}, {}, false, WorkloadTier::smoke), std::nullopt) << "nothing left out";
}

}  // namespace
}  // namespace d2k
