// The one HTTP client of d2k: a libcurl easy handle behind a small RAII class. A transport failure
// (refused, reset, timed out) throws HttpError; any HTTP status, 4xx and 5xx included, is a response.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace d2k::llm {

class HttpError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct HttpResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased, in arrival order
  std::string body;
  bool too_large = false;  // the body passed post's max_body_bytes: body holds its first max_body_bytes, the rest was not read

  std::optional<std::string> header(std::string_view name) const;  // name lowercase; the last one wins
};

class Http {
 public:
  Http();
  ~Http();
  Http(const Http&) = delete;
  Http& operator=(const Http&) = delete;

  // headers: "Name: value" lines. timeout_s bounds the whole attempt, connecting included. A body longer
  // than max_body_bytes (decompressed) stops the transfer there and comes back with too_large set, so a
  // hostile or broken server cannot make d2k's memory grow without bound.
  HttpResponse post(const std::string& url, const std::vector<std::string>& headers, const std::string& body,
                    double timeout_s, std::size_t max_body_bytes);

 private:
  void* curl_;  // CURL*; kept across calls so connections are reused
};

}  // namespace d2k::llm
