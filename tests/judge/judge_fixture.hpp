// Shared by the judge tests: a small task whose guidance has a known dependency structure, subjects
// written to a temporary folder, and judge replies built from (id, verdict, quotes).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/guidance.hpp"
#include "core/task.hpp"
#include "judge/subject.hpp"

namespace d2k::judge::testing {

// L1.1 <- L1.2, L1.1 <- L2.1 <- L2.2 <- L3.1, and L3.2 with no dependency.
inline constexpr const char* kGuidance = R"(# Guidance: test/tiny

## L1.1 One read of each row
Depends on: none
Check: each row is read once.

Reading once is the floor.

## L1.2 Exact rounding
Depends on: L1.1
Check: the sum is rounded once.

The reference rounds once.

## L2.1 Registers hold the row
Depends on: L1.1
Check: no re-read after the reduction.

Registers are the closest storage.

## L2.2 Weight through the cache
Depends on: L2.1
Check: the weight is read through the read-only path.

The weight is shared.

## L3.1 Sixteen-byte vectors
Depends on: L2.2
Check: loads are 16 bytes wide.

Fewer instructions.

## L3.2 Warp shuffles
Depends on: none
Check: the reduction uses shuffles.

No shared memory tree.
)";

inline constexpr const char* kDesign =
    "# Design\n\nThe kernel reads every row   once and keeps it\nin registers until the output is written.\n"
    "The sum is rounded to bf16 exactly once.\nThe weight goes through the read-only cache path.\n"
    "All loads are sixteen-byte vectors.\nThe row sum is reduced with warp shuffles.\n";

inline Task tiny_task() {
  Task task;
  task.name = "test/tiny";
  task.summary = "a row normalization";
  task.description = "y = x / rms(x), row by row.";
  task.guidance = parse_guidance(kGuidance, "tiny/guidance.md");
  return task;
}

inline std::vector<std::string> tiny_ids() { return {"L1.1", "L1.2", "L2.1", "L2.2", "L3.1", "L3.2"}; }

class TempDir {
 public:
  TempDir() {
    std::random_device random;
    path_ = std::filesystem::temp_directory_path() / ("d2k-judge-test-" + std::to_string(random()) + std::to_string(random()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& relative, const std::string& text) const {
    const auto file = path_ / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file;
  }

 private:
  std::filesystem::path path_;
};

struct Item {
  std::string verdict;
  std::vector<std::string> evidence;
  std::string reason = "because";
};

// A reply's JSON text: the verdicts in the order given, and an audit when `audit` is an object.
inline std::string reply(const std::vector<std::pair<std::string, Item>>& items, const nlohmann::json& audit = nullptr) {
  nlohmann::json out;
  out["verdicts"] = nlohmann::json::array();
  for (const auto& [id, item] : items)
    out["verdicts"].push_back({{"id", id}, {"verdict", item.verdict}, {"reason", item.reason}, {"evidence", item.evidence}});
  if (audit.is_object()) out["audit"] = audit;
  return out.dump();
}

inline nlohmann::json clean_audit() { return {{"verdict", "clean"}, {"rule", nullptr}, {"reason", "nothing"}, {"evidence", nlohmann::json::array()}}; }

}  // namespace d2k::judge::testing
