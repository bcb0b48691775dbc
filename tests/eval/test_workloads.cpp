#include <gtest/gtest.h>

#include "core/error.hpp"
#include "eval/evaluator.hpp"

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

}  // namespace
}  // namespace d2k
