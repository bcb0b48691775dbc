// Guidance: an expert's design as items at three levels (L1 algorithm, L2 dataflow, L3 execution).
// Written by people as markdown (tasks/<family>/<name>/guidance.md), parsed and validated here.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace d2k {

struct GuidanceItem {
  std::string id;  // "L2.3": level 2, item 3
  int level = 0;   // 1, 2 or 3
  std::string title;
  std::string rationale;
  std::vector<std::string> depends_on;
  std::string check;  // what a reviewer looks for in code
};

struct Guidance {
  std::vector<GuidanceItem> items;  // in file order
};

// Parses and validates guidance markdown. Throws d2k::Error naming the file, line and offending value
// for a malformed heading, a duplicate id, a missing check, an unknown or forward-level dependency or a
// dependency cycle.
Guidance parse_guidance(const std::string& text, const std::filesystem::path& file);
Guidance load_guidance(const std::filesystem::path& file);

// The items of the given levels in dependency order (each after everything it depends on, otherwise in
// file order), rendered as markdown for a prompt or a person.
std::vector<const GuidanceItem*> select_levels(const Guidance& guidance, const std::set<int>& levels);
std::string render_guidance(const Guidance& guidance, const std::set<int>& levels);

}  // namespace d2k
