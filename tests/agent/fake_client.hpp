// An in-process model for loop tests: plays a script of responses (or failures), from any step, and
// keeps every request it was sent.
#pragma once

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm/chat.hpp"

namespace d2k::agent::testing {

// Thrown by the crash hook and by the client at a scripted crash: not a std::exception, so the loop
// lets it through the way a kill -9 would stop it.
struct SimulatedCrash {
  std::string point;
};

struct Crash {};  // a script step: the process dies while the request is in flight

using Step = std::variant<llm::ChatResponse, llm::ChatError, Crash>;

inline llm::ChatResponse respond(std::vector<llm::ToolCall> calls, std::string text = "", int64_t in = 1000, int64_t out = 100) {
  llm::ChatResponse r;
  r.message.role = llm::Role::assistant;
  r.message.text = std::move(text);
  r.message.tool_calls = std::move(calls);
  r.stop_reason = r.message.tool_calls.empty() ? "end_turn" : "tool_use";
  r.usage.input_tokens = in;
  r.usage.cached_input_tokens = in / 4;
  r.usage.output_tokens = out;
  r.usage.raw = {{"prompt_tokens", in}, {"completion_tokens", out}};
  return r;
}

inline llm::ToolCall call(const std::string& id, const std::string& name, const nlohmann::json& args) {
  return {id, name, args.dump()};
}

class FakeClient : public llm::ChatClient {
 public:
  FakeClient(std::vector<Step> script, std::size_t start = 0) : script_(std::move(script)), next_(start) {}
  llm::ChatResponse complete(const llm::ChatRequest& request) override {
    requests.push_back(request);
    if (next_ >= script_.size()) throw llm::ChatError(llm::ChatError::Kind::bad_request, 400, "the script has no step left");
    const auto& step = script_[next_++];
    if (std::holds_alternative<Crash>(step)) throw SimulatedCrash{"mid-request"};
    if (auto* error = std::get_if<llm::ChatError>(&step)) throw *error;
    return std::get<llm::ChatResponse>(step);
  }
  std::vector<llm::ChatRequest> requests;

 private:
  std::vector<Step> script_;
  std::size_t next_;
};

}  // namespace d2k::agent::testing
