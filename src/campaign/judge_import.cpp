#include "campaign/judge_import.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace d2k::campaign {

int import_judge_scores(Store& store, std::vector<std::string>* warnings) {
  namespace fs = std::filesystem;
  int imported = 0;
  for (const auto& run : store.runs()) {
    if (run.run_dir.empty()) continue;
    const fs::path dir = fs::path(run.run_dir) / "judge";
    std::error_code error;
    if (!fs::is_directory(dir, error)) continue;
    for (const auto& entry : fs::directory_iterator(dir, error)) {
      const auto& file = entry.path();
      if (file.extension() != ".json") continue;
      std::ifstream in(file);
      std::stringstream text;
      text << in.rdbuf();
      const auto j = nlohmann::json::parse(text.str(), nullptr, false);
      try {
        if (j.is_discarded()) throw std::runtime_error("not JSON");
        if (!j.value("complete", false)) continue;  // a judgement a cap stopped: not a score
        const auto kind = j.at("kind").get<std::string>();
        JudgeScore score;
        score.key = run.plan.key;
        score.kind = kind == "code" ? "implementation" : kind;
        score.judge = j.at("judge").at("model").get<std::string>();
        score.score = j.at("score").get<double>();
        score.max_score = 100.0;
        score.items = j.contains("items") ? j["items"].dump() : "{}";
        score.audit = j.contains("audit") ? j["audit"].dump() : "{}";
        score.created = fmt::format("{}", fs::last_write_time(file).time_since_epoch().count());
        store.put_judge_score(score);
        ++imported;
      } catch (const std::exception& e) {
        if (warnings) warnings->push_back(fmt::format("{}: not a judge score file ({}); skipped", file.string(), e.what()));
      }
    }
  }
  return imported;
}

}  // namespace d2k::campaign
