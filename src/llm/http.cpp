#include "llm/http.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>

namespace d2k::llm {
namespace {

// curl_global_init is not thread-safe and must run before any handle exists; once per process.
void global_init() {
  static const CURLcode code = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (code != CURLE_OK) throw HttpError(std::string("curl_global_init: ") + curl_easy_strerror(code));
}

std::string trim(std::string_view text) {
  std::size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return std::string(text.substr(begin, end - begin));
}

struct BodySink {
  HttpResponse* response;
  std::size_t max_bytes;
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  std::string& body = sink->response->body;
  std::size_t room = sink->max_bytes - body.size();
  if (size * count > room) {
    body.append(data, room);
    sink->response->too_large = true;
    return 0;  // curl stops the transfer with CURLE_WRITE_ERROR
  }
  body.append(data, size * count);
  return size * count;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* response = static_cast<HttpResponse*>(user);
  std::string_view line(data, size * count);
  // A new status line starts a new response (a 100 Continue before the real one): drop what came before.
  if (line.starts_with("HTTP/")) {
    response->headers.clear();
    return size * count;
  }
  auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name = trim(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    response->headers.emplace_back(std::move(name), trim(line.substr(colon + 1)));
  }
  return size * count;
}

struct HeaderList {
  curl_slist* list = nullptr;
  ~HeaderList() { curl_slist_free_all(list); }
  void add(const std::string& line) {
    curl_slist* grown = curl_slist_append(list, line.c_str());
    if (grown == nullptr) throw HttpError("curl_slist_append: out of memory");
    list = grown;
  }
};

}  // namespace

std::optional<std::string> HttpResponse::header(std::string_view name) const {
  std::optional<std::string> found;
  for (const auto& [key, value] : headers) {
    if (key == name) found = value;
  }
  return found;
}

Http::Http() {
  global_init();
  curl_ = curl_easy_init();
  if (curl_ == nullptr) throw HttpError("curl_easy_init failed");
}

Http::~Http() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

HttpResponse Http::post(const std::string& url, const std::vector<std::string>& headers, const std::string& body,
                        double timeout_s, std::size_t max_body_bytes) {
  CURL* curl = static_cast<CURL*>(curl_);
  curl_easy_reset(curl);  // keeps the connection cache, drops every option of the previous call
  HttpResponse response;
  BodySink sink{&response, max_body_bytes};
  HeaderList list;
  for (const auto& line : headers) list.add(line);
  // curl would otherwise send "Expect: 100-continue" for large bodies and wait for the server's go-ahead.
  list.add("Expect:");
  char error[CURL_ERROR_SIZE] = {0};
  long timeout_ms = std::max(1L, std::lround(timeout_s * 1000));
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list.list);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, std::min(timeout_ms, 30000L));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for DNS timeouts: the process has threads
  curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");  // whatever this libcurl can decompress
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  // A Content-Length over the cap is refused before any of the body is read.
  curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(max_body_bytes));
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  CURLcode code = curl_easy_perform(curl);
  if (code == CURLE_FILESIZE_EXCEEDED) response.too_large = true;
  if (code != CURLE_OK && !response.too_large) {
    std::string detail = error[0] != 0 ? error : curl_easy_strerror(code);
    throw HttpError("POST " + url + ": " + detail);
  }
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  response.status = static_cast<int>(status);
  return response;
}

}  // namespace d2k::llm
