// The transcript of a run: transcript.jsonl in the run folder, one JSON record per line, appended as
// each event happens, so that a kill -9 loses at most the line being written, and flushed to disk
// (fdatasync) at every record that would be costly or wrong to lose in a machine crash. records.cpp maps the records to JSON; docs/agent.md lists them.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace d2k::agent {

class TranscriptWriter {
 public:
  explicit TranscriptWriter(const std::filesystem::path& file);  // appends
  ~TranscriptWriter();
  TranscriptWriter(const TranscriptWriter&) = delete;
  TranscriptWriter& operator=(const TranscriptWriter&) = delete;

  // Adds "seq" (the line's index) and "time" (ISO 8601, UTC) and writes the line with one write(2):
  // from then on it survives a kill -9 of this process. With `sync` it is also flushed to disk
  // (fdatasync, which flushes every earlier line too), so that it survives a crash of the machine.
  void append(nlohmann::json record, bool sync = true);
  int next_seq() const { return seq_; }
  void set_next_seq(int seq) { seq_ = seq; }

 private:
  int fd_ = -1;
  int seq_ = 0;
  std::filesystem::path file_;
};

struct TranscriptFile {
  std::vector<nlohmann::json> records;  // the complete lines
  std::string torn;                     // a last line cut short by a kill (not newline-terminated or not JSON)
  std::size_t complete_bytes = 0;       // the file's size without the torn line
};

// Reads every complete record. A torn last line is returned apart; a bad line elsewhere, or a record
// that is JSON but lacks a field resume needs (record::problem), throws d2k::Error naming the file, the
// line and the field.
TranscriptFile read_transcript(const std::filesystem::path& file);

// Dumps JSON that may hold invalid UTF-8 from a model or a file, replacing bad bytes instead of throwing.
std::string dump_json(const nlohmann::json& value);

// Test seam: D2K_AGENT_CRASH_AT=<point>[:<n>] kills the process with SIGKILL the n-th time (default 1)
// it reaches the named point. Points: request (a request record written, the model not yet called),
// response (a response record written, no tool run yet), tool (a tool's work done, its result not yet
// written), turn (a turn's budget record written), end (the end record written, the final evaluation
// not yet run), write (half of a record line written).
void crash_point(const char* point);
bool crash_due(const char* point);  // counts like crash_point but only says whether to crash

// For tests in one process: a spec that replaces the environment's (counts start again), and what a
// due crash does instead of SIGKILL (a hook that throws something drive() does not catch: anything
// not derived from std::exception). An empty spec turns crashes off; a null hook restores SIGKILL.
void set_crash_spec(const std::string& spec);
void set_crash_hook(std::function<void(const char* point)> hook);

}  // namespace d2k::agent
