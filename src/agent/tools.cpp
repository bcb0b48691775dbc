// Tool specs, argument handling and the file tools. The evaluation tools are in eval_tools.cpp and
// profile.cpp.
#include "agent/tools.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/error.hpp"
#include "core/splitmix.hpp"

namespace d2k::agent {
namespace {

using nlohmann::json;

json object_schema(json properties, std::vector<std::string> required) {
  return {{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)},
          {"additionalProperties", false}};
}

json string_property(const std::string& description) { return {{"type", "string"}, {"description", description}}; }
json integer_property(const std::string& description) { return {{"type", "integer"}, {"description", description}}; }

// A missing or mistyped argument: a format error, like invalid JSON.
struct BadArguments {
  std::string why;
};

std::string need_string(const json& args, const char* key) {
  auto it = args.find(key);
  if (it == args.end()) throw BadArguments{fmt::format("the argument '{}' is missing", key)};
  if (!it->is_string()) throw BadArguments{fmt::format("the argument '{}' must be a string, not {}", key, it->type_name())};
  return it->get<std::string>();
}

std::optional<std::string> optional_string(const json& args, const char* key) {
  auto it = args.find(key);
  if (it == args.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) throw BadArguments{fmt::format("the argument '{}' must be a string, not {}", key, it->type_name())};
  return it->get<std::string>();
}

std::optional<int> optional_int(const json& args, const char* key) {
  auto it = args.find(key);
  if (it == args.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) throw BadArguments{fmt::format("the argument '{}' must be an integer", key)};
  return it->get<int>();
}

ToolOutcome error_outcome(const std::string& message, bool format_error = false) {
  ToolOutcome outcome;
  outcome.result = {{"error", message}};
  outcome.is_error = true;
  outcome.format_error = format_error;
  return outcome;
}

bool allowed(Condition condition, const std::string& name) {
  for (const auto& spec : tool_specs(condition))
    if (spec.name == name) return true;
  return false;
}

std::string tool_names(Condition condition) {
  std::string names;
  for (const auto& spec : tool_specs(condition)) names += (names.empty() ? "" : ", ") + spec.name;
  return names;
}

}  // namespace

uint64_t derive_seed(uint64_t seed, uint64_t salt) {
  return splitmix_finalize(seed + kSplitMixIncrement * (salt + 1));
}

std::vector<llm::ToolSpec> tool_specs(Condition condition, Language language) {
  const bool triton = language == Language::triton;
  std::vector<llm::ToolSpec> specs;
  specs.push_back({"list_files", "List the files of your workspace (or of one folder in it), with their sizes.",
                   object_schema({{"path", string_property("a folder relative to the workspace; default: the workspace")}}, {})});
  specs.push_back({"read_file",
                   fmt::format("Read a text file of your workspace, {} lines or {} KiB at most per call; "
                               "start_line pages through longer files.", kReadLines, kReadBytes / 1024),
                   object_schema({{"path", string_property("relative to the workspace")},
                                  {"start_line", integer_property("1-based first line; default 1")},
                                  {"max_lines", integer_property(fmt::format("default and most: {}", kReadLines))}},
                                 {"path"})});
  specs.push_back({"write_file", "Create or replace a file of your workspace with the given content (folders are created).",
                   object_schema({{"path", string_property("relative to the workspace")},
                                  {"content", string_property("the whole new content")}},
                                 {"path", "content"})});
  specs.push_back({"edit_file",
                   "Replace one exact occurrence of old_text in a file with new_text. old_text must occur exactly "
                   "once, whitespace included.",
                   object_schema({{"path", string_property("relative to the workspace")},
                                  {"old_text", string_property("the exact text to replace; unique in the file")},
                                  {"new_text", string_property("what replaces it")}},
                                 {"path", "old_text", "new_text"})});
  if (condition != Condition::design_only) {
    specs.push_back({"compile",
                     triton ? "Compile the workspace's Triton solution (solution.py and the modules it imports) ahead of "
                              "time: launch runs once per published workload on placeholder tensors of its shapes and "
                              "each kernel it launches is compiled for sm_90a; returns the kernels or Triton's error."
                            : "Compile the workspace's solution into a shared object; returns the compiler's output.",
                     object_schema(json::object(), {})});
    specs.push_back({"check",
                     "Check the solution's outputs on every published workload with freshly drawn inputs: per "
                     "workload the status and error statistics. Untimed.",
                     object_schema(json::object(), {})});
    specs.push_back({"benchmark",
                     "Check and time the solution on every published workload: median time, speedup over the eager "
                     "baseline and percent of the device's speed of light.",
                     object_schema(json::object(), {})});
    specs.push_back({"profile",
                     "Profile the solution's kernels on one published workload with Nsight Compute (duration, "
                     "compute and memory throughput, occupancy), where the device allows it.",
                     object_schema({{"workload", string_property("a published workload; default: the first")}}, {})});
    specs.push_back({"submit",
                     "Submit the workspace's solution as final and end the run. The final evaluation runs it on the "
                     "published workloads and on workloads you have not seen, with fresh inputs.",
                     object_schema(json::object(), {})});
  } else {
    specs.push_back({"submit", "Submit design.md from your workspace as your design and end the run.",
                     object_schema(json::object(), {})});
  }
  return specs;
}

ToolBox::ToolBox(ToolEnv env) : env_(std::move(env)), workspace_(env_.run_dir / "workspace") {}

std::optional<std::filesystem::path> ToolBox::mutated_file(const std::string& name, const std::string& arguments) const {
  if (name != "write_file" && name != "edit_file") return std::nullopt;
  const auto args = json::parse(arguments, nullptr, false);
  if (args.is_discarded() || !args.is_object() || !args.contains("path") || !args["path"].is_string()) return std::nullopt;
  auto where = workspace_.resolve(args["path"].get<std::string>());
  if (auto* path = std::get_if<std::filesystem::path>(&where)) return *path;
  return std::nullopt;
}

ToolOutcome ToolBox::run(const std::string& name, const std::string& arguments, int call_index) {
  const auto started = std::chrono::steady_clock::now();
  ToolOutcome outcome;
  if (!allowed(env_.condition, name)) {
    outcome = error_outcome(fmt::format("there is no tool '{}' (the tools are: {})", name, tool_names(env_.condition)), true);
  } else {
    auto args = arguments.empty() ? json::object() : json::parse(arguments, nullptr, false);
    if (args.is_discarded()) {
      outcome = error_outcome(fmt::format("the arguments of {} are not valid JSON: {}", name, cap_text(arguments, 200)), true);
    } else if (!args.is_object()) {
      outcome = error_outcome(fmt::format("the arguments of {} must be a JSON object, not {}", name, args.type_name()), true);
    } else {
      try {
        if (name == "list_files") outcome = list_files(args);
        else if (name == "read_file") outcome = read_file(args);
        else if (name == "write_file") outcome = write_file(args);
        else if (name == "edit_file") outcome = edit_file(args);
        else if (name == "compile") outcome = compile(args);
        else if (name == "check") outcome = evaluate(args, false, call_index);
        else if (name == "benchmark") outcome = evaluate(args, true, call_index);
        else if (name == "profile") outcome = profile(args, call_index);
        else if (name == "submit") outcome = submit(args);
      } catch (const BadArguments& bad) {
        outcome = error_outcome(fmt::format("{}: {}", name, bad.why), true);
      }
    }
  }
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return outcome;
}

ToolOutcome ToolBox::list_files(const json& args) {
  const auto path = optional_string(args, "path").value_or(".");
  auto listed = workspace_.list(path, kListEntries);
  if (auto* why = std::get_if<std::string>(&listed)) return error_outcome(*why);
  json files = json::array();
  for (const auto& entry : std::get<std::vector<FileEntry>>(listed)) {
    switch (entry.kind) {
      case EntryKind::folder: files.push_back({{"path", entry.path + "/"}}); break;
      case EntryKind::file: files.push_back({{"path", entry.path}, {"bytes", entry.bytes}}); break;
      case EntryKind::link: files.push_back({{"path", entry.path}, {"kind", "symlink"}}); break;
      case EntryKind::special: files.push_back({{"path", entry.path}, {"kind", "special (FIFO, socket or device)"}}); break;
    }
  }
  ToolOutcome outcome;
  outcome.result = {{"files", files}};
  if (files.size() >= kListEntries) outcome.result["truncated"] = true;
  return outcome;
}

ToolOutcome ToolBox::read_file(const json& args) {
  const auto path = need_string(args, "path");
  const int start = optional_int(args, "start_line").value_or(1);
  const int lines = std::clamp(optional_int(args, "max_lines").value_or(kReadLines), 1, kReadLines);
  auto read = workspace_.read(path, start, lines, kReadBytes);
  if (auto* why = std::get_if<std::string>(&read)) return error_outcome(*why);
  const auto& r = std::get<ReadResult>(read);
  ToolOutcome outcome;
  outcome.result = {{"path", path}, {"content", r.content}, {"first_line", r.first_line}, {"last_line", r.last_line},
                    {"total_lines", r.total_lines}};
  if (r.truncated) outcome.result["truncated"] = true;
  if (!r.note.empty()) outcome.result["note"] = r.note;
  return outcome;
}

ToolOutcome ToolBox::write_file(const json& args) {
  const auto path = need_string(args, "path");
  const auto content = need_string(args, "content");
  if (content.size() > kWriteBytes) return error_outcome(fmt::format("the content is {} bytes; at most {} are allowed", content.size(), kWriteBytes));
  auto written = workspace_.write(path, content);
  if (auto* why = std::get_if<std::string>(&written)) return error_outcome(*why);
  ToolOutcome outcome;
  outcome.result = {{"path", path}, {"bytes", std::get<int64_t>(written)}};
  return outcome;
}

ToolOutcome ToolBox::edit_file(const json& args) {
  const auto path = need_string(args, "path");
  const auto old_text = need_string(args, "old_text");
  const auto new_text = need_string(args, "new_text");
  auto edited = workspace_.edit(path, old_text, new_text);
  if (auto* why = std::get_if<std::string>(&edited)) return error_outcome(*why);
  const auto& e = std::get<EditResult>(edited);
  ToolOutcome outcome;
  outcome.result = {{"path", path}, {"line", e.line}, {"bytes", e.bytes}};
  return outcome;
}

}  // namespace d2k::agent
