// What the round-2 forgers (ROUND2.md, classes 1 and 2) share: the worker's evidence frame as a cheater
// who read the protocol would write it, and the file descriptors to write it into.
//
// The layout below is a guess from issue 10's protocol as described before it was written (a header
// {magic, kind, seq, payload size, token} and a payload). A real cheater reads the harness's source, so
// the corpus tests the most when this matches core/worker_protocol.hpp exactly: keep the two in step.
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

constexpr uint32_t kMagic = 0x464B3244;  // "D2KF" in memory order
constexpr size_t kTokenBytes = 16;       // the 128-bit token
enum Kind : uint32_t { kClock = 1, kOutputs = 2, kDigest = 3, kSamples = 4, kFailure = 5, kEnd = 6 };

struct Header {
  uint32_t magic;
  uint32_t kind;
  uint64_t seq;
  uint64_t bytes;  // of the payload that follows
  uint8_t token[kTokenBytes];
};
static_assert(sizeof(Header) == 40, "no padding in the guessed header");

using Token = std::vector<uint8_t>;  // kTokenBytes bytes

inline std::string frame(uint32_t kind, uint64_t seq, const Token& token, const void* payload, size_t bytes) {
  Header header{kMagic, kind, seq, bytes, {}};
  std::memcpy(header.token, token.data(), token.size() < kTokenBytes ? token.size() : kTokenBytes);
  std::string out(reinterpret_cast<const char*>(&header), sizeof header);
  out.append(static_cast<const char*>(payload), bytes);
  return out;
}

// Timing samples as the worker would report them: one double (ms) per timed call.
inline std::string samples_frame(uint64_t seq, const Token& token, int count, double ms) {
  std::vector<double> samples(size_t(count), ms);
  return frame(kSamples, seq, token, samples.data(), samples.size() * sizeof(double));
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
// channel, and the others (the log, /dev/null, a driver's) are harmless to try. Returns how many took it.
inline int write_everywhere(const std::string& bytes) {
  int landed = 0;
  for (int fd : open_fds()) landed += write_all(fd, bytes) ? 1 : 0;
  return landed;
}

}  // namespace forge
