// The JSON mapping of everything a run writes: run.json (RunSettings) and the transcript's records.
// One function per record type; docs/agent.md describes the fields.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/run_types.hpp"
#include "agent/tools.hpp"
#include "core/trace.hpp"
#include "llm/chat.hpp"

namespace d2k::agent {

void to_json(nlohmann::json& j, const SettingChange& value);
void from_json(const nlohmann::json& j, SettingChange& value);
void to_json(nlohmann::json& j, const RunSettings& value);
void from_json(const nlohmann::json& j, RunSettings& value);
void to_json(nlohmann::json& j, const Candidate& value);
void from_json(const nlohmann::json& j, Candidate& value);
void to_json(nlohmann::json& j, const Used& value);

}  // namespace d2k::agent

namespace d2k::llm {
void to_json(nlohmann::json& j, const ToolCall& value);
void from_json(const nlohmann::json& j, ToolCall& value);
void to_json(nlohmann::json& j, const ToolSpec& value);
void to_json(nlohmann::json& j, const Reasoning& value);
void from_json(const nlohmann::json& j, Reasoning& value);
void from_json(const nlohmann::json& j, ToolSpec& value);
}  // namespace d2k::llm

namespace d2k::agent::record {

using nlohmann::json;

struct Overhead {  // of one turn, in milliseconds: the harness's own time, model latency and tool work excluded
  double overhead_ms = 0;
  double model_seconds = 0;
  double tool_seconds = 0;
};

json prompt(const std::string& system, const std::string& user, const std::vector<llm::ToolSpec>& tools);
json request(int turn, std::size_t messages);
json response(int turn, const llm::ChatResponse& response, double cost_usd);
json tool_call(int turn, int index, const llm::ToolCall& call);
json tool_result(int turn, int index, const llm::ToolCall& call, const ToolOutcome& outcome, const std::string& content);
json user(int turn, const std::string& text);
json budget(int turn, const Used& used, int format_errors, const std::optional<Overhead>& overhead);
// error: for an endpoint failure, {kind, http_status, attempts, body}.
json end(RunStatus status, const std::string& reason, const json& error = nullptr);
json final(RunStatus status, const std::string& reason, const std::string& solution, bool passed,
           const std::vector<Trace>& traces, const Used& used, const json& overhead_summary);
json resume(int from_turn, const std::string& torn, const std::vector<int>& rerun_calls);

// What is wrong with a record read back, or nothing: a field that resume needs missing or of the wrong
// kind ("a response record without usage.output_tokens"), a status that is no run status. Records of
// types not listed in docs/agent.md are not checked.
std::optional<std::string> problem(const json& record);

// Reading a record back.
llm::Message assistant_message(const json& response_record);
llm::Usage usage(const json& response_record);
// Why the endpoint's reply could not be used (llm::ChatResponse::format_error); empty for a readable one.
std::string format_error(const json& response_record);

}  // namespace d2k::agent::record
