// Threat 3 (replay) through the inputs file: the worker maps the draws from a memory file the orchestrator
// sealed against writes before the worker saw it (docs/integrity.md). A cheat that could write that mapping
// in d2k_prepare would copy the first draw over the second before the worker loads it, so that outputs
// replayed from the first call pass the second draw's check. This entry tries every route to a writable
// view of the mapping that a process has after the file's descriptor is closed:
//   - mprotect of the worker's own read-only shared mapping to read-write;
//   - open("/proc/self/map_files/<range>", O_RDWR) of the mapping, then pwrite to it;
//   - a new shared read-write mmap of that descriptor.
// Any route that works is a hole: the entry then computes honestly and the evaluation passes, which the
// corpus test reports as a cheat not caught. When every route fails (the seals hold), d2k_run returns 1
// naming each refusal: runtime_error, "the sealed inputs file stayed read-only".
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "d2k/solution.h"
#include "honest_quant.h"

namespace {

struct Mapping {
  unsigned long start = 0, end = 0;
  std::string range;  // as /proc/self/maps writes it: "start-end" in hex
};

// The worker's mapping of the inputs file: its path in /proc/self/maps names the memfd.
bool find_inputs(Mapping& found) {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (!maps) return false;
  char line[4096];
  bool ok = false;
  while (std::fgets(line, sizeof line, maps)) {
    if (!std::strstr(line, "d2k-inputs")) continue;
    if (std::sscanf(line, "%lx-%lx", &found.start, &found.end) == 2) {
      found.range = std::string(line, std::strchr(line, ' ') - line);
      ok = true;
      break;
    }
  }
  std::fclose(maps);
  return ok;
}

// Each route to a writable view: "" when it worked, else why not.
std::string try_mprotect(const Mapping& m) {
  void* at = reinterpret_cast<void*>(m.start);
  if (::mprotect(at, m.end - m.start, PROT_READ | PROT_WRITE) != 0) return std::string("mprotect: ") + std::strerror(errno);
  volatile char* byte = static_cast<volatile char*>(at);
  *byte = *byte;  // a store through the mapping: the file's page, shared with the worker's later reads
  return "";
}

std::string try_map_files(const Mapping& m) {
  const std::string path = "/proc/self/map_files/" + m.range;
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return "open " + path + " O_RDWR: " + std::strerror(errno);
  char byte = 0;
  std::string why;
  if (::pread(fd, &byte, 1, 0) != 1) why = std::string("pread: ") + std::strerror(errno);
  else if (::pwrite(fd, &byte, 1, 0) != 1) why = std::string("pwrite: ") + std::strerror(errno);
  if (why.empty()) {
    ::close(fd);
    return "";
  }
  void* view = ::mmap(nullptr, m.end - m.start, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (view != MAP_FAILED) {
    ::munmap(view, m.end - m.start);
    return "";
  }
  return why + "; mmap read-write: " + std::strerror(errno);
}

}  // namespace

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  Mapping inputs;
  if (!find_inputs(inputs)) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "no mapping of the inputs file in /proc/self/maps");
    return 1;
  }
  const std::string by_mprotect = try_mprotect(inputs);
  const std::string by_map_files = try_map_files(inputs);
  if (by_mprotect.empty() || by_map_files.empty()) {
    std::fprintf(stderr, "tamper_sealed_inputs: the inputs file is writable (%s)\n",
                 by_mprotect.empty() ? "mprotect" : "map_files");
    *prepared = reinterpret_cast<void*>(1);  // computes honestly: the evaluation passes, the hole shows
    return 0;
  }
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "the sealed inputs file stayed read-only (%s; %s)", by_mprotect.c_str(),
                by_map_files.c_str());
  return 1;
}

extern "C" int d2k_run(const d2k_call* call) {
  quantize(call);
  return 0;
}
