#include "scripted_server.hpp"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <stdexcept>

namespace d2k::scripted {
namespace {

using nlohmann::json;

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string show(const json& value) { return value.dump(); }

// The failures of one request against a step's expect object.
std::vector<std::string> check(const json& expect, const std::string& method, const std::string& path,
                               const std::map<std::string, std::string>& headers, const std::string& body) {
  std::vector<std::string> failures;
  if (expect.is_null()) return failures;
  if (auto want = expect.find("path"); want != expect.end() && *want != path) {
    failures.push_back("path is " + path + ", expected " + want->get<std::string>());
  }
  if (auto want = expect.find("method"); want != expect.end() && *want != method) {
    failures.push_back("method is " + method + ", expected " + want->get<std::string>());
  }
  if (auto want = expect.find("headers"); want != expect.end()) {
    for (auto& [name, value] : want->items()) {
      auto got = headers.find(lower(name));
      if (value.is_null()) {
        if (got != headers.end()) failures.push_back("header " + name + " is present (" + got->second + "), expected absent");
      } else if (got == headers.end()) {
        failures.push_back("header " + name + " is missing, expected " + value.get<std::string>());
      } else if (got->second != value.get<std::string>()) {
        failures.push_back("header " + name + " is " + got->second + ", expected " + value.get<std::string>());
      }
    }
  }
  bool need_json = expect.contains("json") || expect.contains("absent");
  json parsed = need_json ? json::parse(body, nullptr, false) : json();
  if (need_json && parsed.is_discarded()) {
    failures.push_back("the body is not JSON");
    return failures;
  }
  if (auto want = expect.find("json"); want != expect.end()) {
    for (auto& [pointer, value] : want->items()) {
      json::json_pointer at(pointer);
      if (!parsed.contains(at)) {
        failures.push_back("body" + pointer + " is missing, expected " + show(value));
      } else if (parsed.at(at) != value) {
        failures.push_back("body" + pointer + " is " + show(parsed.at(at)) + ", expected " + show(value));
      }
    }
  }
  if (auto want = expect.find("absent"); want != expect.end()) {
    for (const json& pointer : *want) {
      json::json_pointer at(pointer.get<std::string>());
      if (parsed.contains(at)) failures.push_back("body" + pointer.get<std::string>() + " is present: " + show(parsed.at(at)));
    }
  }
  if (auto want = expect.find("contains"); want != expect.end()) {
    for (const json& part : *want) {
      if (body.find(part.get<std::string>()) == std::string::npos) {
        failures.push_back("the body does not contain " + show(part));
      }
    }
  }
  return failures;
}

json error_body(const std::string& message) {
  return {{"type", "error"}, {"error", {{"type", "scripted_server_error"}, {"message", message}}}};
}

}  // namespace

Step step_from_json(const json& step, std::size_t index) {
  auto where = [&](const std::string& field) { return "script step " + std::to_string(index) + ": " + field; };
  if (!step.is_object()) throw std::runtime_error(where("") + "must be an object, not " + step.dump());
  static const char* known[] = {"status", "headers", "body", "delay_ms", "chunked", "expect"};
  for (auto& [key, value] : step.items()) {
    if (std::find(std::begin(known), std::end(known), key) == std::end(known)) {
      throw std::runtime_error(where(key) + " is not a step field (status, headers, body, delay_ms, chunked, expect)");
    }
  }
  Step out;
  if (step.contains("status")) {
    if (!step["status"].is_number_integer()) throw std::runtime_error(where("status") + " must be an integer");
    out.status = step["status"].get<int>();
  }
  if (step.contains("headers")) {
    if (!step["headers"].is_object()) throw std::runtime_error(where("headers") + " must be an object");
    for (auto& [name, value] : step["headers"].items()) {
      if (!value.is_string()) throw std::runtime_error(where("headers." + name) + " must be a string");
      out.headers.emplace_back(name, value.get<std::string>());
    }
  }
  if (step.contains("body")) out.body = step["body"].is_string() ? step["body"].get<std::string>() : step["body"].dump();
  if (step.contains("delay_ms")) {
    if (!step["delay_ms"].is_number_integer() || step["delay_ms"].get<int>() < 0) {
      throw std::runtime_error(where("delay_ms") + " must be a whole number >= 0");
    }
    out.delay_ms = step["delay_ms"].get<int>();
  }
  if (step.contains("chunked")) {
    if (!step["chunked"].is_boolean()) throw std::runtime_error(where("chunked") + " must be true or false");
    out.chunked = step["chunked"].get<bool>();
  }
  if (step.contains("expect")) {
    if (!step["expect"].is_object()) throw std::runtime_error(where("expect") + " must be an object");
    out.expect = step["expect"];
  }
  return out;
}

json Request::json() const { return nlohmann::json::parse(body); }

json Request::to_json() const {
  return {{"index", index}, {"method", method}, {"path", path}, {"headers", headers}, {"body", body}, {"failures", failures}};
}

Server::Server() : http_(std::make_unique<httplib::Server>()) {}

Server::~Server() { stop(); }

void Server::push(Step step) {
  std::lock_guard lock(mutex_);
  steps_.push_back(std::move(step));
}

void Server::push(int status, const json& body, std::vector<std::pair<std::string, std::string>> headers) {
  Step step;
  step.status = status;
  step.body = body.is_string() ? body.get<std::string>() : body.dump();
  step.headers = std::move(headers);
  push(std::move(step));
}

void Server::log_to(const std::filesystem::path& jsonl) {
  std::lock_guard lock(mutex_);
  log_ = jsonl;
}

std::string Server::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

int Server::start(int port) {
  auto serve = [this](const httplib::Request& request, httplib::Response& response) {
    std::map<std::string, std::string> headers;
    for (const auto& [name, value] : request.headers) {
      // httplib files the socket's addresses among the headers; they were not sent.
      std::string key = lower(name);
      if (key != "remote_addr" && key != "remote_port" && key != "local_addr" && key != "local_port") headers[key] = value;
    }
    int status = 200;
    std::vector<std::pair<std::string, std::string>> out_headers;
    std::string body, content_type = "application/json";
    bool chunked = false;
    handle(request.method, request.path, headers, request.body, status, out_headers, body, content_type, chunked);
    response.status = status;
    for (const auto& [name, value] : out_headers) {
      if (lower(name) != "content-type") response.set_header(name, value);
    }
    if (!chunked) {
      response.set_content(body, content_type);
      return;
    }
    response.set_chunked_content_provider(content_type, [body = std::move(body)](std::size_t, httplib::DataSink& sink) {
      if (!body.empty()) sink.write(body.data(), body.size());
      sink.done();
      return true;
    });
  };
  http_->Post(".*", serve);
  http_->Get(".*", serve);
  http_->Put(".*", serve);
  // The logger runs once a response has been written out: that is when a step counts as played.
  http_->set_logger([this](const httplib::Request&, const httplib::Response&) {
    std::lock_guard lock(mutex_);
    ++played_;
    changed_.notify_all();
  });
  // stop() waits for every kept-alive connection to idle out; a client that keeps its connection open
  // (as curl does) would otherwise hold it up for httplib's default of 5 s.
  http_->set_keep_alive_timeout(1);
  if (port == 0) {
    port_ = http_->bind_to_any_port("127.0.0.1");
  } else {
    port_ = http_->bind_to_port("127.0.0.1", port) ? port : -1;
  }
  if (port_ <= 0) throw std::runtime_error("scripted server: cannot bind 127.0.0.1:" + std::to_string(port));
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  // httplib's stop() does nothing until the accept loop runs: wait for it, so a stop() right after
  // start() is not lost.
  for (int waited_ms = 0; !http_->is_running(); ++waited_ms) {
    if (waited_ms == 10000) throw std::runtime_error("scripted server: the accept loop did not start");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return port_;
}

void Server::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    changed_.notify_all();
  }
  if (thread_.joinable()) {
    http_->stop();
    thread_.join();
  }
}

void Server::handle(const std::string& method, const std::string& path, const std::map<std::string, std::string>& headers,
                    const std::string& body, int& status, std::vector<std::pair<std::string, std::string>>& out_headers,
                    std::string& out_body, std::string& content_type, bool& chunked) {
  std::unique_lock lock(mutex_);
  Request request;
  request.index = received_.size();
  request.method = method;
  request.path = path;
  request.headers = headers;
  request.body = body;
  const Step* step = request.index < steps_.size() ? &steps_[request.index] : nullptr;
  if (step == nullptr) {
    request.failures.push_back("no step left: the script has " + std::to_string(steps_.size()));
  } else {
    request.failures = check(step->expect, method, path, headers, body);
  }
  if (!log_.empty()) {
    std::ofstream out(log_, std::ios::app);
    out << request.to_json().dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    out.flush();
  }
  received_.push_back(request);
  changed_.notify_all();
  if (!request.failures.empty()) {
    status = 400;
    std::string message = "scripted server: request " + std::to_string(request.index) + ": ";
    for (std::size_t i = 0; i < request.failures.size(); ++i) message += (i ? "; " : "") + request.failures[i];
    out_body = error_body(message).dump();
    return;
  }
  Step answer = *step;  // steps_ may grow (and move) while this one waits out its delay
  if (answer.delay_ms > 0) {
    changed_.wait_for(lock, std::chrono::milliseconds(answer.delay_ms), [this] { return stopping_; });
  }
  status = answer.status;
  out_body = answer.body;
  chunked = answer.chunked;
  for (const auto& [name, value] : answer.headers) {
    if (lower(name) == "content-type") content_type = value;
    out_headers.emplace_back(name, value);
  }
}

std::vector<Request> Server::received() const {
  std::lock_guard lock(mutex_);
  return received_;
}

std::vector<std::string> Server::failures() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const Request& request : received_) {
    for (const std::string& failure : request.failures) {
      out.push_back("#" + std::to_string(request.index) + " " + request.path + ": " + failure);
    }
  }
  return out;
}

std::size_t Server::steps() const {
  std::lock_guard lock(mutex_);
  return steps_.size();
}

std::size_t Server::played() const {
  std::lock_guard lock(mutex_);
  return played_;
}

bool Server::wait_played(std::size_t count, double timeout_s) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return played_ >= count; });
}

}  // namespace d2k::scripted
