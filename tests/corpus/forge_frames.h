// What the round-2 forgers (ROUND2.md, classes 1 and 2) share: the worker's evidence frame as a cheater
// who read the protocol would write it, and the file descriptors to write it into.
//
// The layout below is core/worker_protocol.hpp's, exactly (a real cheater reads the harness's source):
// a header {magic "D2K2", kind, seq, payload size, token}, then the payload: a u32 size, that many bytes
// of JSON fields, then raw bytes (tensor data). Keep the two in step.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace forge {

constexpr uint32_t kMagic = 0x324b3244;  // "D2K2" in memory order
constexpr size_t kTokenBytes = 16;       // the 128-bit token
enum Kind : uint32_t { kStage = 10, kClock = 11, kOutputs = 12, kDigest = 13, kSamples = 14, kFailure = 15, kEnd = 16 };

struct Header {
  uint32_t magic;
  uint32_t kind;
  uint64_t seq;
  uint64_t bytes;  // of the payload that follows (the fields' size, the fields, the raw bytes)
  uint8_t token[kTokenBytes];
};
static_assert(sizeof(Header) == 40, "no padding in the guessed header");

using Token = std::vector<uint8_t>;  // kTokenBytes bytes

// A frame with JSON `fields` and `raw` bytes after them.
inline std::string frame(uint32_t kind, uint64_t seq, const Token& token, const std::string& fields,
                         const void* raw = nullptr, size_t raw_bytes = 0) {
  const uint32_t fields_size = uint32_t(fields.size());
  Header header{kMagic, kind, seq, sizeof fields_size + fields.size() + raw_bytes, {}};
  std::memcpy(header.token, token.data(), token.size() < kTokenBytes ? token.size() : kTokenBytes);
  std::string out(reinterpret_cast<const char*>(&header), sizeof header);
  out.append(reinterpret_cast<const char*>(&fields_size), sizeof fields_size);
  out += fields;
  if (raw_bytes > 0) out.append(static_cast<const char*>(raw), raw_bytes);
  return out;
}

// The outputs of a call as the worker sends them: `draw` is "second", "checked" or "timed" (with `call`).
inline std::string outputs_frame(uint64_t seq, const Token& token, const std::string& draw, const void* raw,
                                 size_t bytes, long call = -1) {
  std::string fields = "{\"draw\":\"" + draw + "\",\"guard_violations\":[]";
  if (call >= 0) fields += ",\"call\":" + std::to_string(call);
  return frame(kOutputs, seq, token, fields + "}", raw, bytes);
}

// Timing samples as the worker reports them: `count` samples of `ms`, a plausible report around them.
inline std::string samples_frame(uint64_t seq, const Token& token, int count, double ms) {
  std::string samples;
  for (int i = 0; i < count; ++i) samples += (i ? "," : "") + std::to_string(ms);
  return frame(kSamples, seq, token,
               "{\"samples_ms\":[" + samples + "],\"calls\":" + std::to_string(count) +
                   ",\"rotation_sets\":2,\"rotation_bytes\":0,\"noop_samples\":10}");
}

// The worker's last frame.
inline std::string end_frame(uint64_t seq, const Token& token) {
  return frame(kEnd, seq, token, "{\"device_name\":\"forged\",\"guard_violations\":[]}");
}

// 32 hex digits -> 16 bytes; false for anything else.
inline bool parse_token(const std::string& hex, Token& out) {
  if (hex.size() != 2 * kTokenBytes) return false;
  out.assign(kTokenBytes, 0);
  for (size_t i = 0; i < hex.size(); ++i) {
    const char c = hex[i];
    int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (v < 0) return false;
    out[i / 2] = uint8_t(out[i / 2] << 4 | v);
  }
  return true;
}

inline bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Where bytes may hold the token: the value of a JSON key "token" (hex, any length up to 64 digits), and
// any run of exactly 32 hex digits. Adds what it finds to `found`, up to `limit` candidates.
inline void token_candidates(const char* data, size_t n, std::set<std::string>& found, size_t limit = 4096) {
  static const char kKey[] = "\"token\"";
  for (size_t i = 0; i < n && found.size() < limit; ++i) {
    if (data[i] == '"' && n - i > sizeof kKey && std::memcmp(data + i, kKey, sizeof kKey - 1) == 0) {
      size_t at = i + sizeof kKey - 1;
      while (at < n && (data[at] == ' ' || data[at] == ':' || data[at] == '\n')) ++at;
      if (at < n && data[at] == '"') {
        size_t end = ++at;
        while (end < n && end - at < 64 && is_hex(data[end])) ++end;
        if (end < n && data[end] == '"' && end > at) found.insert(std::string(data + at, end - at));
      }
    }
    if (is_hex(data[i]) && (i == 0 || !is_hex(data[i - 1]))) {
      size_t end = i;
      while (end < n && is_hex(data[end])) ++end;
      if (end - i == 2 * kTokenBytes) found.insert(std::string(data + i, end - i));
      i = end - 1;
    }
  }
}

// Every open descriptor: each number from 0 to 1023 that fcntl knows, and whatever /proc/self/fd lists
// above that (the worker may have moved its channels anywhere).
inline std::vector<int> open_fds() {
  std::set<int> fds;
  for (int fd = 0; fd < 1024; ++fd)
    if (::fcntl(fd, F_GETFD) != -1) fds.insert(fd);
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    const int own = ::dirfd(dir);
    while (const dirent* entry = ::readdir(dir)) {
      char* end = nullptr;
      const long fd = std::strtol(entry->d_name, &end, 10);
      if (end != entry->d_name && *end == '\0' && fd != own) fds.insert(int(fd));
    }
    ::closedir(dir);
  }
  return {fds.begin(), fds.end()};
}

inline std::string describe_fd(int fd) {
  char link[256];
  const ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), link, sizeof link - 1);
  return n > 0 ? std::string(link, size_t(n)) : "?";
}

inline bool is_pipe(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

inline bool is_writable(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags != -1 && (flags & O_ACCMODE) != O_RDONLY;
}

// The pipes (and sockets) this process may write: the evidence channel is among them.
inline std::vector<int> writable_pipes() {
  std::vector<int> out;
  for (int fd : open_fds())
    if (is_pipe(fd) && is_writable(fd)) out.push_back(fd);
  return out;
}

// Writes all of `bytes` into `fd`; false at the first refusal.
inline bool write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

// Writes `bytes` into every open descriptor, as the brief of a forger goes: one of them is the evidence
// channel, and the others (the log, /dev/null, a driver's) are harmless to try. Returns how many took it,
// and says on stderr (the log) which pipes refused it, so that a test can see the evidence channel did.
inline int write_everywhere(const std::string& bytes) {
  int landed = 0;
  for (int fd : open_fds()) {
    errno = 0;
    if (write_all(fd, bytes)) {
      ++landed;
    } else if (is_pipe(fd) && errno == EPERM) {
      const std::string line = "cheat: a write to fd " + std::to_string(fd) + " was refused: " + std::strerror(errno) + "\n";
      (void)!::write(2, line.data(), line.size());
    }
  }
  return landed;
}

}  // namespace forge
