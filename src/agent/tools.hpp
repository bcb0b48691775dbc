// The tools a model calls: JSON-schema function tools whose results are structured JSON, capped in
// size. A tool never throws for anything the model did: bad arguments, a missing file, a solution that
// does not compile are results with is_error or a failed status. Results never name hidden workloads
// and never show reference output values.
#pragma once

#include <filesystem>
#include <optional>
#include <variant>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/condition.hpp"
#include "agent/workspace.hpp"
#include "core/task.hpp"
#include "core/text.hpp"
#include "llm/chat.hpp"
#include "runner/builder.hpp"

namespace d2k {
struct EvalEnvironment;  // eval/environment.hpp
struct EvalSettings;     // eval/evaluator.hpp
struct TritonSetup;      // runner/triton.hpp
}

namespace d2k::agent {

// A solution that passed check (or benchmark) on every published workload, copied out of the
// workspace into the run folder at that moment.
struct Candidate {
  std::string dir;  // relative to the run folder: candidates/<tool call index>
  int call_index = 0;
  std::optional<double> time_geomean_ms;  // benchmark: the geomean of the workloads' median times
};

struct ToolOutcome {
  nlohmann::json result;      // what the model sees, as JSON
  bool is_error = false;      // the call failed (bad arguments, a missing file, ...)
  bool format_error = false;  // unknown tool or arguments that are not a JSON object
  bool submitted = false;     // submit: the run ends after this turn
  std::optional<Candidate> candidate;
  double seconds = 0;         // time the tool's own work took
};

struct ToolEnv {
  const Task* task = nullptr;
  Condition condition = Condition::none;
  std::filesystem::path run_dir;
  const EvalEnvironment* environment = nullptr;  // device, root, caches, worker, sandbox
  const EvalSettings* eval = nullptr;   // timing; workloads: the published ones used
  uint64_t seed = 1;                    // the run's seed; each check and benchmark draws from it
  // The run's language (run_types.hpp): the solution the tools take from the workspace must be in it.
  Language language = Language::cuda;
};

// The tools of a condition and language: design-only has the file tools and submit only; the
// descriptions of compile and submit name what is compiled (nvcc, the host compiler, or Triton's
// ahead-of-time compile in the warm-up).
std::vector<llm::ToolSpec> tool_specs(Condition condition, Language language = Language::cuda);

class ToolBox {
 public:
  explicit ToolBox(ToolEnv env);
  const Workspace& workspace() const { return workspace_; }

  // Runs one call. `call_index` numbers the run's tool calls from 0 (it seeds check and benchmark and
  // names candidates). Throws only for harness failures (d2k::Error), never for the model's mistakes.
  ToolOutcome run(const std::string& name, const std::string& arguments, int call_index);

  // The workspace file a call would change (write_file, edit_file), so that the caller can save it
  // first; nothing for other tools or unusable arguments.
  std::optional<std::filesystem::path> mutated_file(const std::string& name, const std::string& arguments) const;

 private:
  ToolOutcome list_files(const nlohmann::json& args);
  ToolOutcome read_file(const nlohmann::json& args);
  ToolOutcome write_file(const nlohmann::json& args);
  ToolOutcome edit_file(const nlohmann::json& args);
  ToolOutcome compile(const nlohmann::json& args);
  ToolOutcome evaluate(const nlohmann::json& args, bool time, int call_index);
  ToolOutcome profile(const nlohmann::json& args, int call_index);
  ToolOutcome submit(const nlohmann::json& args);
  // The workspace's solution, or why it cannot be used (none, or not in the run's language).
  std::variant<Solution, std::string> run_solution() const;
  ToolOutcome compile_triton(const Solution& solution, const BuildResult& build, const TritonSetup& setup,
                             ToolOutcome outcome);

  ToolEnv env_;
  Workspace workspace_;
};

// A seed of its own for each use of the run's seed (splitmix64 of seed and salt): fresh per call,
// yet the same when a resumed run repeats a call.
uint64_t derive_seed(uint64_t seed, uint64_t salt);

// Caps a text at max_bytes, keeping its head and tail and saying how much was cut.


// Limits of what a tool returns.
inline constexpr std::size_t kReadBytes = 24 * 1024;
inline constexpr int kReadLines = 600;
inline constexpr std::size_t kLogBytes = 8 * 1024;
inline constexpr std::size_t kListEntries = 500;
inline constexpr std::size_t kWriteBytes = 1 << 20;
inline constexpr std::size_t kResultBytes = 32 * 1024;
// Arguments longer than this are stored once, in the response record (a tool_call record gives their
// size), and those of a refused call are not sent back to the model: a refused 50 MB write_file once made
// a 105 MB transcript and 52 MB requests, every turn.
inline constexpr std::size_t kStoredArgumentsBytes = 64 * 1024;

}  // namespace d2k::agent
