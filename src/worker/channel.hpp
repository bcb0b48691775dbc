// The worker's two streams (core/worker_protocol.hpp): frames in from the orchestrator on the control
// stream, frames out on the evidence stream, each written whole before the worker goes on.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <string_view>
#include <vector>

#include "core/worker_protocol.hpp"

namespace d2k {

// Moves the streams the orchestrator gave the worker (stdin, fd 3) to kControlFd and kEvidenceFd, puts
// /dev/null on stdin and points stdout at stderr, so that what the solution prints goes to the log and
// nothing it writes on its standard streams can look like evidence. The inputs file (fd 4) is left
// unread (the orchestrator may still be filling it) and closed on exec, so that no process the set-up
// runs (Triton's) inherits it. Throws d2k::Error.
void take_channels();

// The inputs file (fd 4), once the control stream has said where the draws lie in it: its seals checked
// (the orchestrator seals it against any write, growth or shrink before it sends the draws' frames, so a
// sealed file holds all it will ever hold), mapped read-only, its descriptor closed. Throws d2k::Error.
std::string_view map_inputs();

class ControlChannel {
 public:
  // The next frame; throws d2k::Error at end of stream or on a malformed frame.
  Frame read();
};

// Where a raw part's bytes go, in order, in pieces of any size.
using ByteSink = std::function<void(const char* data, std::size_t size)>;

// A raw part written as it is produced (a GPU buffer copied out in pieces through pinned memory), not
// assembled first: hundreds of MB of outputs never sit in a fresh host string. `write` gives the sink
// exactly `bytes`.
struct RawSource {
  std::size_t bytes = 0;
  std::function<void(const ByteSink&)> write;
};

class EvidenceChannel {
 public:
  explicit EvidenceChannel(const Token& token) : token_(token) {}
  // One frame: `fields` as JSON, then the raw parts one after another; returns its seq. Throws
  // d2k::Error when the orchestrator is gone.
  uint64_t send(FrameKind kind, const nlohmann::json& fields, const std::vector<std::string_view>& raw = {});
  // The same with parts written as they are produced; a part that gives other than its `bytes` throws
  // (the frame on the stream is then broken, and the orchestrator says so).
  uint64_t send(FrameKind kind, const nlohmann::json& fields, const std::vector<RawSource>& raw);

 private:
  Token token_;
  uint64_t seq_ = 0;
};

}  // namespace d2k
