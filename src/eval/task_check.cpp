// The loader stops at a task.toml's first error, so a broken task.toml is one problem; everything that
// does not need the loaded task (guidance, the registered code, solutions, notes) is checked anyway,
// so that a new task's author sees the whole list at once.
#include "eval/task_check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "core/error.hpp"
#include "core/file_bytes.hpp"
#include "core/guidance.hpp"
#include "core/scaffold.hpp"
#include "core/task_loader.hpp"
#include "reference/inputs.hpp"
#include "reference/oracle.hpp"
#include "reference/task_code.hpp"
#include "reference/tensors.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;

constexpr int kItemsPerLevel = 3;

bool has_placeholder(std::string_view text) { return text.find(kPlaceholder) != std::string_view::npos; }

// A value as a message shows it: its first line, and "..." when more follows.
std::string first_line(std::string text) {
  text.erase(0, text.find_first_not_of('\n'));
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end) + " ...";
}

class TaskChecker {
 public:
  TaskChecker(const fs::path& dir, const fs::path& root) : dir_(dir), root_(root), toml_(dir / "task.toml") {}

  std::vector<std::string> run() {
    const auto task = load();
    if (task) {
      check_placeholders(*task);
      check_workloads(*task);
      check_guidance(task->guidance);
    }
    check_code(task ? task->name : folder_name(), task ? &*task : nullptr);
    check_solutions();
    check_notes();
    return std::move(problems_);
  }

 private:
  void problem(const fs::path& file, const std::string& field, const std::string& message) {
    problems_.push_back(field.empty() ? fmt::format("{}: {}", file.string(), message)
                                      : fmt::format("{}: {}: {}", file.string(), field, message));
  }

  std::string folder_name() const {
    return fs::weakly_canonical(dir_).lexically_relative(fs::weakly_canonical(root_)).generic_string();
  }

  // The task, or nothing after reporting why it does not load (and the guidance's own errors, which
  // the loader reads last and so never reached).
  std::optional<Task> load() {
    if (!fs::is_regular_file(toml_)) {
      problem(toml_, "", "missing (d2k new-task writes one to fill in)");
    } else {
      try {
        return load_task(dir_, root_);
      } catch (const Error& error) {
        problems_.push_back(error.what());
        if (std::string_view(error.what()).starts_with((dir_ / "guidance.md").string())) return std::nullopt;
      }
    }
    try {
      check_guidance(load_guidance(dir_ / "guidance.md"));
    } catch (const Error& error) {
      problems_.push_back(error.what());
    }
    return std::nullopt;
  }

  void placeholder(const std::string& field, const std::string& value) {
    if (has_placeholder(value))
      problem(toml_, fmt::format("{} = \"{}\"", field, first_line(value)), "still the scaffold's placeholder; replace it");
  }

  void check_placeholders(const Task& task) {
    placeholder("summary", task.summary);
    placeholder("source", task.source);
    placeholder("baseline", task.baseline);
    placeholder("library", task.library);
    placeholder("description", task.description);
    for (std::size_t i = 0; i < task.workloads.size(); ++i) {
      placeholder(fmt::format("workloads[{}].name", i), task.workloads[i].name);
      placeholder(fmt::format("workloads[{}].model", i), task.workloads[i].model);
    }
  }

  void check_workloads(const Task& task) {
    const auto count = [&](auto&& pred) { return std::count_if(task.workloads.begin(), task.workloads.end(), pred); };
    if (count([](const Workload& w) { return w.smoke && !w.hidden; }) == 0) {
      problem(toml_, "workloads", "no smoke workload (smoke = true, not hidden): the cpu device runs the smoke tier by "
                                  "default and CI runs it for every task");
    }
    if (count([](const Workload& w) { return w.hidden; }) == 0) {
      problem(toml_, "workloads", "no hidden workload (hidden = true): a final evaluation needs a shape the solution "
                                  "was never shown");
    }
    // The loader evaluated every formula; a zero memory floor would also switch off the check for
    // impossible times (docs/metrics.md).
    for (const auto& workload : task.workloads) {
      if (min_bytes_of(task, workload) <= 0)
        problem(toml_, "min_bytes", fmt::format("gives 0 for workload '{}': every call moves some bytes", workload.name));
    }
  }

  void check_guidance(const Guidance& guidance) {
    const fs::path file = dir_ / "guidance.md";
    for (int level = 1; level <= 3; ++level) {
      const auto n = std::count_if(guidance.items.begin(), guidance.items.end(),
                                   [&](const GuidanceItem& item) { return item.level == level; });
      if (n < kItemsPerLevel)
        problem(file, fmt::format("L{}", level), fmt::format("{} items; a task needs at least {} per level", n, kItemsPerLevel));
    }
    for (const auto& item : guidance.items) {
      if (has_placeholder(item.title) || has_placeholder(item.check) || has_placeholder(item.rationale))
        problem(file, item.id, "still the scaffold's placeholder (TODO); write the item");
    }
  }

  void check_code(const std::string& name, const Task* task) {
    const fs::path file = dir_ / "reference.cpp";
    if (!fs::is_regular_file(file)) {
      problem(file, "", "missing: the eager reference (src/reference/task_code.hpp)");
      return;
    }
    const auto code = make_task_code(name);
    if (!code) {
      problem(file, "D2K_REGISTER_TASK",
              fmt::format("no reference code is registered as '{}' in this d2k; build d2k again (CMake compiles every "
                          "tasks/*/*/reference.cpp into it)", name));
      return;
    }
    if (task == nullptr) return;
    if (code->has_library() && task->library.empty())
      problem(toml_, "library", "missing: reference.cpp defines a library path; say which, e.g. library = \"torch._scaled_mm\"");
    if (!code->has_library() && !task->library.empty())
      problem(toml_, fmt::format("library = \"{}\"", task->library), "reference.cpp defines no library path (TaskCode::library)");
    run_reference(*task, *code, file);
  }

  // The reference on the first smoke workload, on the cpu device: it runs, and its outputs have the
  // shapes and dtypes task.toml declares (the eager baseline is timed on exactly these).
  void run_reference(const Task& task, const TaskCode& code, const fs::path& file) {
    const auto smoke = std::find_if(task.workloads.begin(), task.workloads.end(),
                                    [](const Workload& w) { return w.smoke && !w.hidden; });
    if (smoke == task.workloads.end()) return;
    try {
      auto inputs = place_inputs(make_inputs(task, code, *smoke, 1), Device::cpu, Precision::native);
      const auto outputs = call_reference(task, code, inputs, scalars_for(task, *smoke));
      for (const auto& spec : task.outputs) {
        const at::Tensor& got = outputs.at(spec.name);
        const auto shape = geometry_of(spec, *smoke).shape;
        if (got.sizes().vec() != shape)
          problem(file, "reference", fmt::format("output '{}' has shape [{}] on workload '{}'; task.toml says [{}]", spec.name,
                                                 fmt::join(got.sizes().vec(), ", "), smoke->name, fmt::join(shape, ", ")));
        if (from_torch(got.scalar_type()) != spec.dtype)
          problem(file, "reference", fmt::format("output '{}' is {} on workload '{}'; task.toml says {}", spec.name,
                                                 name_of(from_torch(got.scalar_type())), smoke->name, name_of(spec.dtype)));
      }
    } catch (const std::exception& error) {
      problem(file, "reference", fmt::format("fails on the smoke workload '{}' on the cpu device: {}", smoke->name, error.what()));
    }
  }

  void check_solutions() {
    for (const char* device : {"cuda", "cpu"}) {
      const fs::path folder = dir_ / "solution" / device;
      if (!fs::is_directory(folder)) {
        problem(folder, "", fmt::format("missing: the expert's {} solution", device));
        continue;
      }
      std::vector<fs::path> sources;
      for (const auto& entry : fs::directory_iterator(folder)) {
        const auto ext = entry.path().extension();
        if (entry.is_regular_file() && (ext == ".cu" || ext == ".cpp" || ext == ".cc")) sources.push_back(entry.path());
      }
      if (sources.empty()) problem(folder, "", "holds no source file (.cu, .cpp or .cc)");
      std::sort(sources.begin(), sources.end());
      for (const auto& source : sources) {
        const auto text = file_bytes(source);
        if (text && text->find(kNotWrittenYet) != std::string::npos)
          problem(source, "", fmt::format("still the stub d2k new-task wrote (it fails with \"{}\")", kNotWrittenYet));
      }
    }
  }

  // notes.md: per section, whether a placeholder is left.
  void check_notes() {
    const fs::path file = dir_ / "notes.md";
    const auto text = file_bytes(file);
    if (!text) {
      problem(file, "", "missing: the kernel notes (the floor, versions, measurements, profile)");
      return;
    }
    std::string section;  // the "## " heading the line is under; empty above the first
    std::optional<std::string> reported;
    std::size_t start = 0;
    while (start < text->size()) {
      auto end = text->find('\n', start);
      if (end == std::string::npos) end = text->size();
      const std::string_view line(text->data() + start, end - start);
      if (line.starts_with("## ")) section = std::string(line.substr(3));
      if (has_placeholder(line) && section != reported) {
        problem(file, section.empty() ? "" : "## " + section, "still the scaffold's placeholder (TODO)");
        reported = section;
      }
      start = end + 1;
    }
  }

  fs::path dir_, root_, toml_;
  std::vector<std::string> problems_;
};

}  // namespace

std::vector<std::string> check_task(const fs::path& task_dir, const fs::path& tasks_root) {
  return TaskChecker(task_dir, tasks_root).run();
}

std::vector<fs::path> task_folders(const fs::path& tasks_root) {
  if (!fs::is_directory(tasks_root)) fail("{}: the tasks root is not a directory", tasks_root.string());
  std::vector<fs::path> folders;
  for (const auto& family : fs::directory_iterator(tasks_root)) {
    if (!family.is_directory()) continue;
    for (const auto& task : fs::directory_iterator(family.path()))
      if (task.is_directory()) folders.push_back(task.path());
  }
  std::sort(folders.begin(), folders.end());
  return folders;
}

}  // namespace d2k
