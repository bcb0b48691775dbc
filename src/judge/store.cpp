#include "judge/store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>

#include "core/error.hpp"
#include "core/file_bytes.hpp"
#include "core/timestamp.hpp"

namespace d2k::judge {

namespace fs = std::filesystem;

SampleStore::SampleStore(const fs::path& file) : file_(file) {
  if (file.has_parent_path()) fs::create_directories(file.parent_path());
  std::size_t complete = 0;
  if (fs::exists(file)) {
    const auto text = file_bytes(file);
    if (!text) fail("{}: cannot read it", file.string());
    std::size_t line_no = 0;
    // Each record is one write(2) of its line and newline: only a last piece without its newline can be
    // torn. A whole line that is not a record is damage, not a kill.
    for (std::size_t start = 0; start < text->size();) {
      ++line_no;
      const auto end = text->find('\n', start);
      if (end == std::string::npos) break;
      auto record = nlohmann::json::parse(text->substr(start, end - start), nullptr, false);
      if (record.is_discarded() || !record.is_object())
        fail("{}:{}: not a JSON record (the file is damaged; remove it to judge again from the start)", file.string(), line_no);
      records_.push_back(std::move(record));
      start = end + 1;
      complete = start;
    }
    if (complete != text->size()) fs::resize_file(file, complete);
  }
  fd_ = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("{}: cannot open it for appending: {}", file.string(), std::strerror(errno));
}

SampleStore::~SampleStore() {
  if (fd_ >= 0) ::close(fd_);
}

void SampleStore::append(nlohmann::json record, bool sync) {
  record["time"] = utc_timestamp(true);
  write_all(fd_, record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", file_);
  if (sync) ::fdatasync(fd_);
  records_.push_back(std::move(record));
}

void judge_crash_point(const char* point) {
  static const std::string spec = [] {
    const char* env = std::getenv("D2K_JUDGE_CRASH_AT");
    return std::string(env ? env : "");
  }();
  static std::map<std::string, int> seen;
  if (spec.empty()) return;
  const auto colon = spec.find(':');
  const int nth = colon == std::string::npos ? 1 : std::atoi(spec.c_str() + colon + 1);
  if (spec.substr(0, colon) == point && ++seen[point] == nth) ::raise(SIGKILL);
}

}  // namespace d2k::judge
