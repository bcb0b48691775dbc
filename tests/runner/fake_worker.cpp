// A stand-in for d2k-worker that says what the test asks it to (D2K_FAKE_MODE), so that the runner's
// checks of the evidence stream (runner/worker_run.hpp) can be tested frame by frame: it reads the
// request and the draws like the worker, then writes frames on fd 3.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/json.hpp"
#include "core/worker_protocol.hpp"

using namespace d2k;

namespace {

bool read_all(int fd, char* data, std::size_t size) {
  for (std::size_t got = 0; got < size;) {
    const ssize_t n = ::read(fd, data + got, size - got);
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  return true;
}

Frame read_frame() {
  FrameHeader header;
  if (!read_all(0, reinterpret_cast<char*>(&header), sizeof header)) std::exit(4);
  Frame frame;
  frame.kind = static_cast<FrameKind>(header.kind);
  frame.payload.resize(header.size);
  if (!read_all(0, frame.payload.data(), frame.payload.size())) std::exit(4);
  uint32_t fields = 0;
  std::memcpy(&fields, frame.payload.data(), 4);
  frame.fields = frame.payload.substr(4, fields);
  return frame;
}

void send(const std::string& bytes) {
  if (::write(3, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) std::exit(5);
}

}  // namespace

int main() {
  const Frame first = read_frame();
  const auto request = nlohmann::json::parse(first.fields).get<WorkerRequest>();
  const std::string mode = std::getenv("D2K_FAKE_MODE") ? std::getenv("D2K_FAKE_MODE") : "honest";
  // Before its draws come, the inputs file is not sealed yet: the worker's descriptor must not write it.
  if (mode == "write-inputs" && (::pwrite(4, "w", 1, 0) != -1 || errno != EBADF)) return 6;
  for (std::size_t i = 0; i < request.inputs.size() * (request.second_draw ? 2 : 1); ++i) read_frame();
  Token token = *parse_token(request.token);
  std::string outputs;
  for (const auto& output : request.outputs) outputs += std::string(span_bytes(output), '\0');
  uint64_t seq = 0;
  const auto frame = [&](FrameKind kind, const nlohmann::json& fields, const std::string& raw = {}) {
    send(encode_frame(kind, seq++, token, fields.dump(), raw));
  };
  frame(FrameKind::stage, {{"stage", "setup"}, {"seconds", 0.0}});
  if (mode == "stage-back") {
    frame(FrameKind::stage, {{"stage", "run"}, {"seconds", 0.1}});
    frame(FrameKind::stage, {{"stage", "load"}, {"seconds", 0.1}});
  }
  if (mode == "wrong-token") token[3] ^= 1;
  if (mode == "gap") ++seq;
  if (mode == "garbage") send(std::string(64, 'g'));
  if (mode == "unknown-kind") frame(static_cast<FrameKind>(99), nlohmann::json::object());
  if (mode == "bad-fields") send(encode_frame(FrameKind::failure, seq++, token, "{\"status\": 3}"));
  frame(FrameKind::outputs, {{"draw", "checked"}}, outputs);
  if (mode == "twice") frame(FrameKind::outputs, {{"draw", "checked"}}, outputs);
  if (mode == "short-outputs") frame(FrameKind::outputs, {{"draw", "second"}}, outputs.substr(1));
  frame(FrameKind::end, {{"device_name", "fake"}, {"guard_violations", nlohmann::json::array()}});
  if (mode == "after-end") frame(FrameKind::end, {{"device_name", "fake again"}});
  return 0;
}
