// One judgement: a subject (a design or a solution) scored against a task's guidance by a judge model,
// in several samples with the items in a different order each time. Every request and reply is stored
// as it happens (judge/store.hpp), so a killed judgement resumes without asking again for a reply it
// has; the score document (JSON) is written at the end. docs/judge.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/task.hpp"
#include "judge/agreement.hpp"
#include "judge/prompt.hpp"
#include "judge/score.hpp"
#include "judge/subject.hpp"
#include "judge/verdict.hpp"
#include "llm/chat.hpp"

namespace d2k::judge {

// An endpoint reply that could not be used (a format error of the endpoint) is sent again, up to this
// many times a request; then the request counts as answered with nothing usable.
constexpr int kMaxFormatErrors = 3;

struct JudgeSetup {
  const Task* task = nullptr;
  Subject subject;
  std::vector<IntegrityRule> rules;   // code: the rules the audit names
  llm::ChatClient* client = nullptr;  // null: only stored replies can be used
  std::function<double(const llm::Usage&)> cost_usd;
  std::string model;                  // the judge's name in the models file: recorded, never in a prompt
  nlohmann::json model_entry;         // its settings (provider, model id, sampling, prices): recorded
  int samples = 3;
  std::optional<uint64_t> seed;       // of the item orders; none: the stored one, else a random one
  std::optional<double> max_cost_usd;       // over every reply of the judgement, stored ones included
  std::optional<int64_t> max_tokens_total;  // input + output tokens, likewise
  std::filesystem::path out;          // the score document; the samples file is beside it
  std::ostream* log = nullptr;        // progress lines; may be null
};

struct Usage {
  int requests = 0;
  int64_t input_tokens = 0;
  int64_t cached_input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0;
};

struct SampleResult {
  int index = 0;
  std::vector<std::string> order;       // the item ids as the prompt showed them
  std::vector<ItemVerdict> verdicts;    // one per item, in guidance order
  std::optional<Audit> audit;           // code
  std::vector<std::string> problems;    // of its replies, as told to the judge
  std::string prompt_sha256;
  Usage usage;
};

struct Judgement {
  std::vector<SampleResult> samples;  // the finished ones, in order
  Score score;
  Agreement agreement;
  std::vector<std::string> flags;     // what a person should look at
  bool complete = false;              // every sample asked for finished
  std::string stopped;                // why not: the budget that ran out
  Usage usage;                        // every reply of the judgement, stored ones included
  nlohmann::json document;            // what was written to setup.out
};

// <out without .json>.samples.jsonl
std::filesystem::path samples_file(const std::filesystem::path& out);

// Runs (or resumes) the judgement and writes its score document. Throws d2k::Error when the stored
// samples belong to another judgement (another subject, guidance, prompt or judge model: the error names
// the field and both values), and llm::ChatError when the endpoint fails for good (what was stored stays).
Judgement run_judge(const JudgeSetup& setup);

}  // namespace d2k::judge
