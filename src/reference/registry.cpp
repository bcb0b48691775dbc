#include <map>
#include <mutex>

#include "core/error.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

// Function-local so that registrations from static initializers in any order find it constructed.
std::map<std::string, TaskCodeFactory>& registry() {
  static std::map<std::string, TaskCodeFactory> factories;
  return factories;
}

}  // namespace

double Scalars::f(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) fail("the reference asked for scalar '{}', which the workload does not define", name);
  return it->second;
}

int64_t Scalars::i(const std::string& name) const { return static_cast<int64_t>(f(name)); }

void register_task_code(const std::string& task_name, TaskCodeFactory factory) {
  if (!is_task_name(task_name)) fail("reference code registers the task '{}', which is not <family>/<name>", task_name);
  auto [it, inserted] = registry().emplace(task_name, std::move(factory));
  if (!inserted) fail("two references register the task '{}'", task_name);
}

std::unique_ptr<TaskCode> make_task_code(const std::string& task_name) {
  auto it = registry().find(task_name);
  return it == registry().end() ? nullptr : it->second();
}

std::vector<std::string> registered_task_codes() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry()) names.push_back(name);
  return names;
}

}  // namespace d2k
