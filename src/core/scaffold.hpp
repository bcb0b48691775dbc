// `d2k new-task <family>/<name>`: a new task folder holding every file docs/task-format.md asks for,
// each with its fields present and commented and its values to fill in (marked TODO), so that
// `d2k tasks --check` lists what is left to do. The folder loads as a task from the start; the
// reference and the solutions build and fail at run time, saying they are not written yet.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace d2k {

// What the scaffold's placeholders carry: a task whose files still hold it is not done.
inline constexpr std::string_view kPlaceholder = "TODO";
// What the scaffold's reference and solutions say when they run.
inline constexpr std::string_view kNotWrittenYet = "not written yet";

// Writes tasks_root/<family>/<name>/ and returns it. Throws d2k::Error for a name that is not
// <family>/<name> (lowercase letters, digits, '_', each part starting with a letter) and for a folder
// that already exists; writes nothing then.
std::filesystem::path scaffold_task(const std::filesystem::path& tasks_root, const std::string& name);

}  // namespace d2k
