// The tensor files the orchestrator sent, read once each: the worker uploads the same inputs several
// times (the second draw, the first draw, the pristine and rotated copies), and reading a 134 MB file
// again for each upload was most of the worker's own time.
#pragma once

#include <filesystem>
#include <map>
#include <string>

namespace d2k {

class SentFiles {
 public:
  explicit SentFiles(std::filesystem::path dir) : dir_(std::move(dir)) {}

  // The bytes of `file` (relative to the request's folder), read on first use. Throws d2k::Error.
  const std::string& bytes(const std::string& file);

 private:
  std::filesystem::path dir_;
  std::map<std::string, std::string> read_;
};

}  // namespace d2k
