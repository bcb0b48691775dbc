// The samples file of a judgement (<score>.samples.jsonl): its settings, then every request, reply and
// finished sample, one JSON record a line, appended as each happens with one write(2), so that a kill -9
// loses at most the line being written and a resumed judgement never asks again for a reply it has.
// Replies and finished samples are also flushed to disk (fdatasync): they cost money to lose.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace d2k::judge {

class SampleStore {
 public:
  // Reads the file's complete records (a torn last line, from a kill mid-write, is cut off the file) and
  // opens it for appending; creates it (and its folder) when it does not exist. A bad line before the
  // last throws d2k::Error naming the file and the line.
  explicit SampleStore(const std::filesystem::path& file);
  ~SampleStore();
  SampleStore(const SampleStore&) = delete;
  SampleStore& operator=(const SampleStore&) = delete;

  const std::vector<nlohmann::json>& records() const { return records_; }
  const std::filesystem::path& file() const { return file_; }
  // Adds "time" (ISO 8601 UTC) and appends the record; `sync`: flushed to disk before returning.
  void append(nlohmann::json record, bool sync);

 private:
  std::filesystem::path file_;
  int fd_ = -1;
  std::vector<nlohmann::json> records_;
};

// Test seam, as the agent's D2K_AGENT_CRASH_AT: D2K_JUDGE_CRASH_AT=<point>[:<n>] kills the process with
// SIGKILL the n-th time it reaches `request` (a request record written, the judge not yet answered),
// `response` (a reply recorded, the sample not finished) or `sample` (a sample recorded).
void judge_crash_point(const char* point);

}  // namespace d2k::judge
