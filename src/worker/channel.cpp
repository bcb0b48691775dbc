#include "worker/channel.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "worker/evidence_write.hpp"

namespace d2k {
namespace {

// Through the one write the worker's seccomp filter lets reach the evidence stream (evidence_write.hpp).
void write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const long n = evidence_write(fd, data, size);
    if (n == -EINTR) continue;
    if (n <= 0) fail("the evidence stream: {}", n < 0 ? std::strerror(static_cast<int>(-n)) : "no progress");
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

// Reads exactly `size` bytes; false at end of stream before the first byte.
bool read_all(int fd, char* data, std::size_t size) {
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, data + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("the control stream: {}", std::strerror(errno));
    if (n == 0) {
      if (got == 0) return false;
      fail("the control stream ended inside a frame");
    }
    got += static_cast<std::size_t>(n);
  }
  return true;
}

void move_fd(int from, int to) {
  if (::dup3(from, to, O_CLOEXEC) < 0) fail("cannot move fd {} to {}: {}", from, to, std::strerror(errno));
  ::close(from);
}

}  // namespace

void take_channels() {
  move_fd(0, kControlFd);
  move_fd(kChildEvidenceFd, kEvidenceFd);
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0 || ::dup2(null, 0) < 0) fail("cannot put /dev/null on stdin: {}", std::strerror(errno));
  ::close(null);
  if (::dup2(2, 1) < 0) fail("cannot point stdout at stderr: {}", std::strerror(errno));
  if (::fcntl(kChildInputsFd, F_SETFD, FD_CLOEXEC) != 0)
    fail("no inputs file on fd {}: {}", kChildInputsFd, std::strerror(errno));
}

std::string_view map_inputs() {
  constexpr int kSealed = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;
  const int seals = ::fcntl(kChildInputsFd, F_GET_SEALS);
  if (seals < 0) fail("the inputs file on fd {} has no seals: {}", kChildInputsFd, std::strerror(errno));
  if ((seals & kSealed) != kSealed) fail("the inputs file is not sealed against writes (its seals: {:#x})", seals);
  struct stat info {};
  if (::fstat(kChildInputsFd, &info) != 0) fail("no inputs file on fd {}: {}", kChildInputsFd, std::strerror(errno));
  const auto size = static_cast<std::size_t>(info.st_size);
  void* map = size == 0 ? nullptr : ::mmap(nullptr, size, PROT_READ, MAP_SHARED, kChildInputsFd, 0);
  if (map == MAP_FAILED) fail("cannot map the inputs file: {}", std::strerror(errno));
  ::close(kChildInputsFd);
  return {static_cast<const char*>(map), size};
}

Frame ControlChannel::read() {
  FrameHeader header;
  if (!read_all(kControlFd, reinterpret_cast<char*>(&header), sizeof header)) fail("the control stream ended");
  if (header.magic != kFrameMagic) fail("the control stream holds a frame with magic {:#x}", header.magic);
  Frame frame;
  frame.kind = static_cast<FrameKind>(header.kind);
  frame.seq = header.seq;
  frame.payload.resize(static_cast<std::size_t>(header.size));
  if (!read_all(kControlFd, frame.payload.data(), frame.payload.size()) && header.size > 0)
    fail("the control stream ended inside a frame");
  uint32_t fields_size = 0;
  if (frame.payload.size() < sizeof fields_size) fail("a control frame of {} bytes", frame.payload.size());
  std::memcpy(&fields_size, frame.payload.data(), sizeof fields_size);
  if (sizeof fields_size + uint64_t{fields_size} > frame.payload.size()) fail("a control frame with a bad fields size");
  frame.fields = frame.payload.substr(sizeof fields_size, fields_size);
  frame.raw_begin = sizeof fields_size + fields_size;
  return frame;
}

uint64_t EvidenceChannel::send(FrameKind kind, const nlohmann::json& fields, const std::vector<std::string_view>& raw) {
  std::vector<RawSource> sources;
  for (auto part : raw) sources.push_back({part.size(), [part](const ByteSink& sink) { sink(part.data(), part.size()); }});
  return send(kind, fields, sources);
}

uint64_t EvidenceChannel::send(FrameKind kind, const nlohmann::json& fields, const std::vector<RawSource>& raw) {
  std::size_t raw_bytes = 0;
  for (const auto& part : raw) raw_bytes += part.bytes;
  const uint64_t seq = seq_++;
  const std::string head = encode_frame_head(kind, seq, token_, fields.dump(), raw_bytes);
  write_all(kEvidenceFd, head.data(), head.size());
  for (const auto& part : raw) {
    std::size_t written = 0;
    part.write([&](const char* data, std::size_t size) {
      if (written + size > part.bytes) fail("a raw part of {} bytes gave more", part.bytes);
      write_all(kEvidenceFd, data, size);
      written += size;
    });
    if (written != part.bytes) fail("a raw part of {} bytes gave {}", part.bytes, written);
  }
  return seq;
}

}  // namespace d2k
