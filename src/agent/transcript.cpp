#include "agent/transcript.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "agent/records.hpp"
#include "agent/workspace.hpp"
#include "core/timestamp.hpp"
#include "core/error.hpp"
#include "core/file_bytes.hpp"

namespace d2k::agent {

std::string dump_json(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

struct CrashState {
  std::string spec;
  std::map<std::string, int> seen;
  std::function<void(const char*)> hook;
};

CrashState& crash_state() {
  static CrashState state = [] {
    CrashState s;
    if (const char* env = std::getenv("D2K_AGENT_CRASH_AT")) s.spec = env;
    return s;
  }();
  return state;
}

void crash_now(const char* point) {
  auto& state = crash_state();
  if (state.hook) state.hook(point);
  ::raise(SIGKILL);
}

}  // namespace

void set_crash_spec(const std::string& spec) {
  crash_state().spec = spec;
  crash_state().seen.clear();
}

void set_crash_hook(std::function<void(const char*)> hook) { crash_state().hook = std::move(hook); }

bool crash_due(const char* point) {
  auto& state = crash_state();
  if (state.spec.empty()) return false;
  const auto colon = state.spec.find(':');
  const auto name = state.spec.substr(0, colon);
  const int nth = colon == std::string::npos ? 1 : std::atoi(state.spec.c_str() + colon + 1);
  if (name != point) return false;
  // A campaign drives several runs on threads of one process (src/campaign): the count is the process's.
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  return ++state.seen[point] == nth;
}

void crash_point(const char* point) {
  if (crash_due(point)) crash_now(point);
}

TranscriptWriter::TranscriptWriter(const std::filesystem::path& file) : file_(file) {
  fd_ = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot open the transcript {}: {}", file.string(), std::strerror(errno));
}

TranscriptWriter::~TranscriptWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void TranscriptWriter::append(nlohmann::json record, bool sync) {
  nlohmann::json line = {{"seq", seq_}, {"time", utc_timestamp(true)}};
  line.update(record);
  std::string text = dump_json(line) + '\n';
  if (crash_due("write")) {
    write_all(fd_, std::string_view(text).substr(0, text.size() / 2), file_);
    ::fdatasync(fd_);
    crash_now("write");
  }
  write_all(fd_, text, file_);
  if (sync && ::fdatasync(fd_) != 0) fail("cannot flush the transcript {}: {}", file_.string(), std::strerror(errno));
  ++seq_;
}

TranscriptFile read_transcript(const std::filesystem::path& file) {
  const auto text = read_whole_file(file);
  if (!text) fail("cannot read the transcript {}", file.string());
  TranscriptFile result;
  std::size_t pos = 0;
  int line = 0;
  while (pos < text->size()) {
    ++line;
    const auto nl = text->find('\n', pos);
    if (nl == std::string::npos) {
      result.torn = text->substr(pos);
      break;
    }
    auto record = nlohmann::json::parse(text->begin() + static_cast<std::ptrdiff_t>(pos),
                                        text->begin() + static_cast<std::ptrdiff_t>(nl), nullptr, false);
    if (record.is_discarded() || !record.is_object()) {
      if (nl + 1 == text->size()) {
        result.torn = text->substr(pos);
        break;
      }
      fail("{}:{}: not a JSON record (only the last line may be torn)", file.string(), line);
    }
    if (auto why = record::problem(record)) fail("{}:{}: {}", file.string(), line, *why);
    result.records.push_back(std::move(record));
    pos = nl + 1;
    result.complete_bytes = pos;
  }
  return result;
}

}  // namespace d2k::agent
