#include <set>

#include <fmt/format.h>

#include "llm/wire.hpp"

namespace d2k::llm {

void make_tool_call_ids_unique(std::vector<ToolCall>& calls, const std::vector<Message>& conversation) {
  std::set<std::string> taken;
  std::size_t place = 0;
  for (const Message& message : conversation) {
    for (const ToolCall& call : message.tool_calls) {
      taken.insert(call.id);
      ++place;
    }
  }
  for (ToolCall& call : calls) {
    ++place;
    if (!call.id.empty() && taken.insert(call.id).second) continue;
    // Letters, digits and '_' only: Anthropic takes tool_use ids matching ^[a-zA-Z0-9_-]+$.
    std::string id = fmt::format("d2k_call_{}", place);
    while (!taken.insert(id).second) id += "_";
    call.original_id = std::move(call.id);
    call.id = std::move(id);
  }
}

}  // namespace d2k::llm
