// The scripted endpoint itself: steps in order, expectations checked, requests logged; and the
// d2k-scripted-server executable driven as a process, the way the agent's end-to-end tests use it.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "llm/http.hpp"
#include "scripted_server.hpp"

namespace d2k::scripted {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path scratch() {
  static int counter = 0;
  fs::path dir = fs::temp_directory_path() / fmt::format("d2k-test-scripted-{}-{}", ::getpid(), counter++);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<json> read_jsonl(const fs::path& file) {
  std::vector<json> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

TEST(ScriptedServer, PlaysStepsInOrderAndChecksExpectations) {
  fs::path dir = scratch();
  Server server;
  server.log_to(dir / "requests.jsonl");
  server.start();
  server.push({201, {{"X-Step", "one"}}, R"({"n": 1})", 0,
               {{"path", "/v1/messages"}, {"headers", {{"x-api-key", "k"}}}, {"json", {{"/model", "m"}}}}});
  server.push({200, {{"Content-Type", "text/plain"}}, "two", 0, {{"contains", {"needle"}}, {"absent", {"/tools"}}}});
  llm::Http http;
  auto first = http.post(server.url() + "/v1/messages", {"x-api-key: k"}, R"({"model": "m"})", 5, 1 << 20);
  EXPECT_EQ(first.status, 201);
  EXPECT_EQ(first.body, R"({"n": 1})");
  EXPECT_EQ(first.header("x-step"), "one");
  EXPECT_EQ(first.header("content-type"), "application/json");
  auto second = http.post(server.url() + "/v1/chat/completions", {}, R"({"tools": [], "x": "no pin"})", 5, 1 << 20);
  EXPECT_EQ(second.status, 400);  // both expectations failed
  auto third = http.post(server.url() + "/v1/chat/completions", {}, "{}", 5, 1 << 20);
  EXPECT_EQ(third.status, 400);  // no step left
  EXPECT_TRUE(server.wait_played(3, 5)) << server.played();

  auto failures = server.failures();
  ASSERT_EQ(failures.size(), 3u) << testing::PrintToString(failures);
  EXPECT_EQ(failures[0], "#1 /v1/chat/completions: body/tools is present: []");
  EXPECT_EQ(failures[1], "#1 /v1/chat/completions: the body does not contain \"needle\"");
  EXPECT_EQ(failures[2], "#2 /v1/chat/completions: no step left: the script has 2");
  EXPECT_NE(second.body.find("needle"), std::string::npos);
  auto received = server.received();
  ASSERT_EQ(received.size(), 3u);
  EXPECT_EQ(received[0].headers["x-api-key"], "k");
  EXPECT_EQ(received[0].json()["model"], "m");
  server.stop();
  auto log = read_jsonl(dir / "requests.jsonl");
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0]["path"], "/v1/messages");
  EXPECT_EQ(log[0]["body"], R"({"model": "m"})");
  EXPECT_EQ(log[1]["failures"].size(), 2u);
  fs::remove_all(dir);
}

TEST(ScriptedServer, AWrongHeaderOrValueIsAFailure) {
  Server server;
  server.start();
  server.push({200, {}, "{}", 0, {{"headers", {{"authorization", "Bearer a"}}}, {"json", {{"/n", 2}}}}});
  llm::Http http;
  EXPECT_EQ(http.post(server.url() + "/x", {"Authorization: Bearer b"}, R"({"n": 3})", 5, 1 << 20).status, 400);
  auto failures = server.failures();
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_EQ(failures[0], "#0 /x: header authorization is Bearer b, expected Bearer a");
  EXPECT_EQ(failures[1], "#0 /x: body/n is 3, expected 2");
}

TEST(ScriptedServer, StepFromJsonRejectsUnknownFields) {
  EXPECT_THROW(step_from_json(json{{"stauts", 200}}, 0), std::runtime_error);
  EXPECT_THROW(step_from_json(json{{"delay_ms", -1}}, 0), std::runtime_error);
  Step step = step_from_json(json{{"status", 429}, {"headers", {{"Retry-After", "2"}}}, {"body", {{"a", 1}}}}, 0);
  EXPECT_EQ(step.status, 429);
  EXPECT_EQ(step.body, R"({"a":1})");
  EXPECT_EQ(step.headers, (std::vector<std::pair<std::string, std::string>>{{"Retry-After", "2"}}));
}

TEST(ScriptedServer, AChunkedStepIsSentWithoutContentLength) {
  Server server;
  server.start();
  server.push(step_from_json(json{{"body", "0123456789"}, {"chunked", true}}, 0));
  llm::Http http;
  auto response = http.post(server.url() + "/v1/messages", {}, "{}", 5, 1 << 20);
  EXPECT_EQ(response.body, "0123456789");
  EXPECT_EQ(response.header("transfer-encoding"), "chunked");
  EXPECT_FALSE(response.header("content-length").has_value());
  EXPECT_THROW(step_from_json(json{{"chunked", 1}}, 0), std::runtime_error);
}

// The cap holds whether the server announces the length (refused before reading) or streams the body.
TEST(Http, StopsReadingABodyAtTheCap) {
  Server server;
  server.start();
  std::string body(100000, 'x');
  for (bool chunked : {false, true}) {
    Step step;
    step.body = body;
    step.chunked = chunked;
    server.push(step);
    llm::Http http;
    auto response = http.post(server.url() + "/v1/messages", {}, "{}", 5, 4096);
    EXPECT_TRUE(response.too_large) << "chunked " << chunked;
    EXPECT_EQ(response.status, 200);
    EXPECT_LE(response.body.size(), 4096u);
  }
  Step small;
  small.body = std::string(4096, 'y');
  server.push(small);
  auto response = llm::Http().post(server.url() + "/v1/messages", {}, "{}", 5, 4096);
  EXPECT_FALSE(response.too_large);
  EXPECT_EQ(response.body.size(), 4096u);
}

// Runs the executable on `script`, posts `bodies` to it in turn, sends SIGTERM if asked, and returns its
// exit status.
int run_executable(const fs::path& dir, const json& script, const std::vector<std::string>& bodies, bool terminate,
                   std::vector<int>* statuses) {
  std::ofstream(dir / "script.json") << script.dump();
  std::string script_path = (dir / "script.json").string(), log_path = (dir / "log.jsonl").string();
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    ::execl(D2K_SCRIPTED_SERVER_PATH, D2K_SCRIPTED_SERVER_PATH, script_path.c_str(), log_path.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  FILE* out = ::fdopen(pipe_fds[0], "r");
  char line[64] = {0};
  bool started = std::fgets(line, sizeof line, out) != nullptr;
  std::fclose(out);
  if (started) {
    int port = std::atoi(line);
    llm::Http http;
    for (const std::string& body : bodies) {
      statuses->push_back(http.post(fmt::format("http://127.0.0.1:{}/v1/messages", port), {}, body, 5, 1 << 20).status);
    }
  }
  if (terminate) ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return started && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ScriptedServerExecutable, PrintsItsPortLogsRequestsAndExitsWhenPlayed) {
  fs::path dir = scratch();
  json script = json::array({
      {{"status", 429}, {"headers", {{"Retry-After", "2"}}}, {"body", {{"type", "error"}}}},
      {{"status", 200}, {"body", {{"content", json::array()}}}, {"expect", {{"json", {{"/model", "m"}}}}}},
  });
  std::vector<int> statuses;
  EXPECT_EQ(run_executable(dir, script, {R"({"model": "m"})", R"({"model": "m"})"}, false, &statuses), 0);
  EXPECT_EQ(statuses, (std::vector<int>{429, 200}));
  auto log = read_jsonl(dir / "log.jsonl");
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1]["path"], "/v1/messages");
  EXPECT_EQ(log[1]["body"], R"({"model": "m"})");
  fs::remove_all(dir);
}

TEST(ScriptedServerExecutable, ExitsWithOneAfterAFailedExpectation) {
  fs::path dir = scratch();
  json script = json::array({
      {{"status", 200}, {"body", "{}"}, {"expect", {{"json", {{"/model", "m"}}}}}},
      {{"status", 200}, {"body", "{}"}},
  });
  std::vector<int> statuses;
  EXPECT_EQ(run_executable(dir, script, {R"({"model": "other"})"}, false, &statuses), 1);
  EXPECT_EQ(statuses, (std::vector<int>{400}));
  fs::remove_all(dir);
}

TEST(ScriptedServerExecutable, StopsOnSigtermWithStepsLeft) {
  fs::path dir = scratch();
  json script = json::array({{{"status", 200}, {"body", "{}"}}, {{"status", 200}, {"body", "{}"}}});
  std::vector<int> statuses;
  EXPECT_EQ(run_executable(dir, script, {"{}"}, true, &statuses), 0);
  EXPECT_EQ(statuses, (std::vector<int>{200}));
  EXPECT_EQ(read_jsonl(dir / "log.jsonl").size(), 1u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace d2k::scripted
