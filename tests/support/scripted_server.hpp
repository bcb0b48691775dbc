// A scripted model endpoint for tests: real HTTP on 127.0.0.1, answering each request, whatever its
// path (/v1/chat/completions, /v1/messages, ...), with the next step of a script, after checking what
// the step expects of the request. Every request is kept (and, if asked, appended to a JSONL log as it
// arrives), so tests can check exactly what a client sent.
//
// A request the script has no step for, or one that fails its step's expectations, is answered 400
// with an error body that says why (400: clients do not retry it), and counted in failures().
#pragma once

#include <condition_variable>
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace httplib {
class Server;
}

namespace d2k::scripted {

struct Step {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // Content-Type defaults to application/json
  std::string body;
  int delay_ms = 0;  // wait this long before answering (a slow model, a request to kill the client in)
  // Checks on the request, all optional: {"path": "/v1/messages", "method": "POST",
  //   "headers": {"x-api-key": "k", "authorization": null (must be absent)},
  //   "json": {"/model": "m", "/messages/0/role": "user"} (JSON pointers into the body and their values),
  //   "absent": ["/tools"] (pointers that must not exist), "contains": ["text"] (substrings of the body)}
  nlohmann::json expect;
  bool chunked = false;  // sent with Transfer-Encoding: chunked and no Content-Length, as a streaming server would
};

// A script file's step: {"status", "headers": {name: value}, "body": a string (sent as is) or any other
// JSON value (sent serialized), "delay_ms", "chunked", "expect"}; all optional. Throws std::runtime_error naming
// the bad field.
Step step_from_json(const nlohmann::json& step, std::size_t index);

struct Request {
  std::size_t index = 0;                      // 0 for the first request received
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers;  // names lowercased
  std::string body;
  std::vector<std::string> failures;          // expectations it failed; "no step left" included

  nlohmann::json json() const;     // the body parsed; throws when it is not JSON
  nlohmann::json to_json() const;  // {"index", "method", "path", "headers", "body", "failures"}: the log line
};

class Server {
 public:
  Server();
  ~Server();  // stops
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  void push(Step step);
  void push(int status, const nlohmann::json& body, std::vector<std::pair<std::string, std::string>> headers = {});
  void log_to(const std::filesystem::path& jsonl);  // before start(); appended to and flushed per request

  int start(int port = 0);  // 0: a free port; returns the port bound
  void stop();              // also cuts short any delay_ms being waited
  int port() const { return port_; }
  std::string url() const;  // http://127.0.0.1:<port>

  std::vector<Request> received() const;
  std::vector<std::string> failures() const;  // of every request, "#<index> <path>: <failure>"
  std::size_t steps() const;                  // pushed so far
  std::size_t played() const;                 // responses written out in full
  bool wait_played(std::size_t count, double timeout_s) const;

 private:
  void handle(const std::string& method, const std::string& path, const std::map<std::string, std::string>& headers,
              const std::string& body, int& status, std::vector<std::pair<std::string, std::string>>& out_headers,
              std::string& out_body, std::string& content_type, bool& chunked);

  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::vector<Step> steps_;
  std::vector<Request> received_;
  std::size_t played_ = 0;
  bool stopping_ = false;
  std::filesystem::path log_;
};

}  // namespace d2k::scripted
