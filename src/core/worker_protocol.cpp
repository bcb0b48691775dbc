#include "core/worker_protocol.hpp"

#include <fmt/format.h>

#include <cstring>

#include "core/splitmix.hpp"

namespace d2k {
namespace {

template <typename Enum, std::size_t N>
std::optional<Enum> parse_name(std::string_view name, const std::array<Enum, N>& all) {
  for (Enum value : all)
    if (name_of(value) == name) return value;
  return std::nullopt;
}

}  // namespace

std::string_view name_of(FrameKind kind) {
  switch (kind) {
    case FrameKind::request: return "request";
    case FrameKind::input: return "input";
    case FrameKind::ack: return "ack";
    case FrameKind::stage: return "stage";
    case FrameKind::clock: return "clock";
    case FrameKind::outputs: return "outputs";
    case FrameKind::digests: return "digests";
    case FrameKind::timing: return "timing";
    case FrameKind::failure: return "failure";
    case FrameKind::end: return "end";
  }
  return "unknown";
}

std::string_view name_of(Stage stage) {
  switch (stage) {
    case Stage::setup: return "setup";
    case Stage::draws: return "draws";
    case Stage::noop_timing: return "noop_timing";
    case Stage::load: return "load";
    case Stage::workspace: return "workspace";
    case Stage::prepare: return "prepare";
    case Stage::second_draw: return "second_draw";
    case Stage::repeat: return "repeat";
    case Stage::run: return "run";
    case Stage::seeded: return "seeded";
    case Stage::timing: return "timing";
    case Stage::verification: return "verification";
    case Stage::noop_call: return "noop_call";
    case Stage::noop_timing_after: return "noop_timing_after";
    case Stage::release: return "release";
    case Stage::done: return "done";
  }
  return "unknown";
}

std::optional<Stage> parse_stage(std::string_view name) {
  constexpr std::array all = {Stage::setup,        Stage::draws,     Stage::noop_timing, Stage::load,
                              Stage::workspace,    Stage::prepare,   Stage::second_draw, Stage::repeat,
                              Stage::run,          Stage::seeded,    Stage::timing,      Stage::verification,
                              Stage::noop_call,    Stage::noop_timing_after, Stage::release, Stage::done};
  return parse_name(name, all);
}

std::string_view name_of(ClockMark mark) {
  switch (mark) {
    case ClockMark::noop_begin: return "noop_begin";
    case ClockMark::noop_end: return "noop_end";
    case ClockMark::timed_begin: return "timed_begin";
    case ClockMark::timed_end: return "timed_end";
    case ClockMark::noop_after_begin: return "noop_after_begin";
    case ClockMark::noop_after_end: return "noop_after_end";
  }
  return "unknown";
}

std::optional<ClockMark> parse_clock_mark(std::string_view name) {
  constexpr std::array all = {ClockMark::noop_begin,      ClockMark::noop_end,       ClockMark::timed_begin,
                              ClockMark::timed_end,       ClockMark::noop_after_begin, ClockMark::noop_after_end};
  return parse_name(name, all);
}

std::string_view name_of(Draw draw) {
  switch (draw) {
    case Draw::second: return "second";
    case Draw::checked: return "checked";
    case Draw::timed: return "timed";
    case Draw::seeded: return "seeded";
  }
  return "unknown";
}

std::optional<Draw> parse_draw(std::string_view name) {
  constexpr std::array all = {Draw::second, Draw::checked, Draw::timed, Draw::seeded};
  return parse_name(name, all);
}

uint64_t seeded_seed(uint64_t key, int64_t call) {
  return splitmix_finalize(key + kSplitMixIncrement * static_cast<uint64_t>(call + 1)) >> 11;
}

std::string_view name_of(WorkerStatus status) {
  switch (status) {
    case WorkerStatus::ok: return "ok";
    case WorkerStatus::runtime_error: return "runtime_error";
    case WorkerStatus::rejected: return "rejected";
  }
  return "unknown";
}

std::optional<WorkerStatus> parse_worker_status(std::string_view name) {
  constexpr std::array all = {WorkerStatus::ok, WorkerStatus::runtime_error, WorkerStatus::rejected};
  return parse_name(name, all);
}

int64_t span_of(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  int64_t span = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return 0;
    span += (shape[i] - 1) * strides[i];
  }
  return span;
}

std::size_t span_bytes(const WireTensor& tensor) {
  return static_cast<std::size_t>(span_of(tensor.shape, tensor.strides)) * size_of(tensor.dtype);
}

const WireTensor* inplace_input(const WorkerRequest& request, const WireTensor& output) {
  if (!output.inplace) return nullptr;
  for (const auto& input : request.inputs) {
    if (input.name == output.name) return &input;
  }
  return nullptr;
}

bool inplace_output(const WorkerRequest& request, const WireTensor& input) {
  for (const auto& output : request.outputs) {
    if (output.inplace && output.name == input.name) return true;
  }
  return false;
}

std::string encode_frame_head(FrameKind kind, uint64_t seq, const Token& token, std::string_view fields,
                              std::size_t raw_bytes) {
  FrameHeader header;
  header.kind = static_cast<uint32_t>(kind);
  header.seq = seq;
  header.size = sizeof(uint32_t) + fields.size() + raw_bytes;
  header.token = token;
  const auto fields_size = static_cast<uint32_t>(fields.size());
  std::string bytes(sizeof header + sizeof fields_size, '\0');
  std::memcpy(bytes.data(), &header, sizeof header);
  std::memcpy(bytes.data() + sizeof header, &fields_size, sizeof fields_size);
  bytes.append(fields);
  return bytes;
}

std::string encode_frame(FrameKind kind, uint64_t seq, const Token& token, std::string_view fields,
                         std::string_view raw) {
  std::string bytes = encode_frame_head(kind, seq, token, fields, raw.size());
  bytes.append(raw);
  return bytes;
}

void FrameReader::fail(std::string why) {
  if (!broken_) broken_ = std::move(why);
}

void FrameReader::feed(const char* data, std::size_t size, double now, std::vector<Frame>& out) {
  while (size > 0 && !broken_) {
    if (!have_header_) {
      const std::size_t take = std::min(size, sizeof header_ - header_fill_);
      std::memcpy(reinterpret_cast<char*>(&header_) + header_fill_, data, take);
      header_fill_ += take;
      data += take;
      size -= take;
      if (header_fill_ < sizeof header_) return;
      if (header_.magic != kFrameMagic) return fail(fmt::format("a frame header with magic {:#010x}", header_.magic));
      if (header_.size < sizeof(uint32_t) || header_.size > max_payload_)
        return fail(fmt::format("a frame of {} bytes (at most {} expected)", header_.size, max_payload_));
      have_header_ = true;
      // Reserved, not filled: zeroing a tensor's gigabytes first cost as much as the bytes' own arrival
      // (2.5 GB of cross_entropy's logits: 1.8 s against 1.3 s of page faults and copy, 2 cores).
      payload_.clear();
      payload_.reserve(static_cast<std::size_t>(header_.size));
    }
    const std::size_t take = static_cast<std::size_t>(std::min<uint64_t>(size, header_.size - payload_.size()));
    payload_.append(data, take);
    data += take;
    size -= take;
    if (payload_.size() < header_.size) return;

    uint32_t fields_size = 0;
    std::memcpy(&fields_size, payload_.data(), sizeof fields_size);
    if (sizeof fields_size + uint64_t{fields_size} > header_.size)
      return fail(fmt::format("a frame whose fields claim {} of its {} bytes", fields_size, header_.size));
    Frame frame;
    frame.kind = static_cast<FrameKind>(header_.kind);
    frame.seq = header_.seq;
    frame.token = header_.token;
    frame.fields = payload_.substr(sizeof fields_size, fields_size);
    // The raw part stays where it arrived: a tensor of hundreds of MB is not copied again.
    frame.payload = std::move(payload_);
    frame.raw_begin = sizeof fields_size + fields_size;
    frame.arrival_seconds = now;
    out.push_back(std::move(frame));
    payload_.clear();
    have_header_ = false;
    header_fill_ = 0;
  }
}

std::optional<Token> parse_token(std::string_view hex) {
  if (hex.size() != 2 * kTokenBytes) return std::nullopt;
  Token token{};
  for (std::size_t i = 0; i < hex.size(); ++i) {
    const char c = hex[i];
    int nibble = -1;
    if (c >= '0' && c <= '9') nibble = c - '0';
    if (c >= 'a' && c <= 'f') nibble = c - 'a' + 10;
    if (nibble < 0) return std::nullopt;
    token[i / 2] = static_cast<uint8_t>(token[i / 2] << 4 | nibble);
  }
  return token;
}

std::string token_hex(const Token& token) {
  std::string hex;
  for (uint8_t byte : token) hex += fmt::format("{:02x}", byte);
  return hex;
}

}  // namespace d2k
