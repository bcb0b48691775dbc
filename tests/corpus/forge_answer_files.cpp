// Round 2, class 1 (threats 16 and 5): forged evidence in files, where the old worker left its own.
// Computes the checked calls honestly and nothing in the timed calls. To cover that it writes what the
// old worker wrote, the answers: every output as <name>.bin, out-<name>.bin, <name>.bin.second and
// <name>.bin.timed (the checked call's bytes), every input as <name>.bin.after (as it was sent), and a
// result.json that says ok with fast samples; into the working directory, HOME, /tmp and the folder of
// every file it finds open; from d2k_release, from an atexit handler and from a static destructor.
// Expected: rejected, "outputs of timed call ... do not match" (the sampled timed calls' outputs reach
// the orchestrator through the evidence pipe right after each call, and hold the poison it left; no file
// is read as evidence, so the files change nothing; the handlers never even run, the worker _exits).
// With the first round's worker the files replaced the worker's own evidence (the .second ones with the
// checked call's outputs: incorrect_numerics); issue 10's variant, which computed nothing in any call,
// passed.
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below
#include "timed_calls.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "forge_frames.h"

namespace {

struct Saved {
  std::string name, bytes;
};
std::vector<Saved> outputs, inputs;  // of the last checked call
double checked_ms = 1.0;

bool write_file(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool ok = forge::write_all(fd, bytes);
  ::close(fd);
  return ok;
}

std::set<std::string> target_folders() {
  std::set<std::string> folders = {".", "/tmp"};
  if (const char* home = std::getenv("HOME")) folders.insert(home);
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) != nullptr) folders.insert(cwd);
  for (int fd : forge::open_fds()) {
    const std::string path = forge::describe_fd(fd);
    if (path.rfind('/', 0) == 0 && path.rfind("/dev/", 0) != 0 && path.rfind("/proc/", 0) != 0)
      folders.insert(path.substr(0, path.rfind('/') + 1));
  }
  return folders;
}

void forge_files(const char* from) {
  char samples[512];
  std::snprintf(samples, sizeof samples, "[%.9g, %.9g, %.9g, %.9g, %.9g]", 0.5 * checked_ms, 0.5 * checked_ms,
                0.5 * checked_ms, 0.5 * checked_ms, 0.5 * checked_ms);
  const std::string result = std::string("{\"status\": \"ok\", \"phase\": \"done\", \"message\": \"\", ") +
                             "\"guard_violations\": [], \"samples_ms\": " + samples + ", \"rotation_sets\": 1}\n";
  int written = 0, refused = 0;
  for (const std::string& folder : target_folders()) {
    const std::string at = folder.back() == '/' ? folder : folder + "/";
    auto put = [&](const std::string& name, const std::string& bytes) { (write_file(at + name, bytes) ? written : refused)++; };
    for (const Saved& out : outputs) {
      for (const char* suffix : {"", ".second", ".timed"}) {
        put(out.name + ".bin" + suffix, out.bytes);
        put("out-" + out.name + ".bin" + suffix, out.bytes);
      }
    }
    for (const Saved& in : inputs) put(in.name + ".bin.after", in.bytes);
    put("result.json", result);
  }
  std::printf("cheat: forged %d answer files from %s (%d refused)\n", written, from, refused);
  std::fflush(stdout);
}

struct AtExit {
  ~AtExit() { forge_files("a static destructor"); }
} at_exit;

}  // namespace

extern "C" int d2k_prepare(const d2k_call*, void** prepared) {
  *prepared = nullptr;
  std::atexit([] { forge_files("an atexit handler"); });
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  if (timing_started(call)) return 0;  // the timed calls: nothing, the files say otherwise
  const auto start = std::chrono::steady_clock::now();
  quantize(call);
  checked_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  outputs = {{call->outputs[0].name, std::string(static_cast<const char*>(call->outputs[0].data), size_t(span_bytes(call->outputs[0], 1)))},
             {call->outputs[1].name, std::string(static_cast<const char*>(call->outputs[1].data), size_t(span_bytes(call->outputs[1], 4)))}};
  inputs = {{call->inputs[0].name, std::string(static_cast<const char*>(call->inputs[0].data), size_t(span_bytes(call->inputs[0], 2)))}};
  return 0;
}

extern "C" void d2k_release(void*) { forge_files("d2k_release"); }
