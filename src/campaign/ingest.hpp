// From a run folder to the store's records: the usage of each response (live, as the transcript grows,
// and whole at the end) and the run's final evaluation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "agent/run.hpp"
#include "campaign/records.hpp"

namespace d2k::campaign {

// The transcript's response records as turn usage. Only complete lines count: a line being written
// (or torn by a kill) is read on a later call.
class TranscriptTail {
 public:
  explicit TranscriptTail(std::filesystem::path file) : file_(std::move(file)) {}
  // The responses in the lines completed since the last call.
  std::vector<TurnUsage> read_new();

 private:
  std::filesystem::path file_;
  std::uintmax_t offset_ = 0;
  int seq_ = 0;
};

// Every response of a transcript (whole, after the run).
std::vector<TurnUsage> transcript_usage(const std::filesystem::path& transcript);

// The run's row once it ended, and its final evaluation's.
RunRow finished_row(const RunRow& planned, const agent::RunResult& result, const std::string& time);
EvaluationRow final_evaluation(const PlannedRun& run, const agent::RunResult& result, const std::string& device,
                               const std::string& time);
EvaluationRow evaluation_of(const std::string& key, const std::string& task, EvaluationKind kind,
                            const std::string& solution, uint64_t seed, const std::string& device,
                            const std::vector<Trace>& traces, bool passed, const std::string& time);

}  // namespace d2k::campaign
