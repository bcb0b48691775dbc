// d2k-scripted-server SCRIPT LOG: plays SCRIPT (a JSON array of steps, see scripted_server.hpp) on
// 127.0.0.1, printing the port on the first line of stdout, and appends every request to LOG (JSONL).
// Exits when every step has been played (0), when a request failed its step's expectations or came with
// no step left (1, once the 400 has been sent), or on SIGTERM/SIGINT (0 unless a request failed).
#include <signal.h>

#include <cerrno>
#include <ctime>
#include <fstream>
#include <iostream>

#include "scripted_server.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: d2k-scripted-server SCRIPT.json LOG.jsonl\n";
    return 2;
  }
  d2k::scripted::Server server;
  try {
    std::ifstream in(argv[1]);
    if (!in) throw std::runtime_error(std::string("cannot read ") + argv[1]);
    nlohmann::json script = nlohmann::json::parse(in);
    if (!script.is_array()) throw std::runtime_error("the script must be a JSON array of steps");
    for (std::size_t i = 0; i < script.size(); ++i) server.push(d2k::scripted::step_from_json(script[i], i));
  } catch (const std::exception& error) {
    std::cerr << "d2k-scripted-server: " << argv[1] << ": " << error.what() << "\n";
    return 2;
  }
  server.log_to(argv[2]);

  // Signals are taken synchronously below; blocked here, before the server's threads exist, they reach
  // no other thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  try {
    int port = server.start();
    std::cout << port << std::endl;
  } catch (const std::exception& error) {
    std::cerr << "d2k-scripted-server: " << error.what() << "\n";
    return 2;
  }
  timespec tick{0, 20'000'000};
  for (;;) {
    int signal = sigtimedwait(&signals, nullptr, &tick);
    if (signal == SIGTERM || signal == SIGINT) break;
    bool failed = !server.failures().empty();
    std::size_t played = server.played();
    if (played >= server.steps() || (failed && played >= server.received().size())) break;
  }
  server.stop();
  auto failures = server.failures();
  for (const auto& failure : failures) std::cerr << "d2k-scripted-server: " << failure << "\n";
  return failures.empty() ? 0 : 1;
}
