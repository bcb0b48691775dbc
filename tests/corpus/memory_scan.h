// What the round-2 cheats that read or patch the worker's memory (ROUND2.md, classes 2 and 4) share:
// the process's mappings as /proc/self/maps lists them, and a walk over every readable byte of them.
// Reads go through /proc/self/mem where it can be opened (a page that cannot be read is an error
// there, not a fault); where it cannot, only anonymous memory, the heap and the stacks are read directly,
// since they cannot fault. Device files (/dev/nvidia*) and the kernel's [vvar] and [vsyscall] are never read.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace scan {

struct Region {
  uintptr_t begin = 0, end = 0;
  bool readable = false, writable = false;
  std::string path;  // empty for anonymous memory
};

inline std::vector<Region> regions() {
  std::vector<Region> out;
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return out;
  char line[4096];
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    Region region;
    char perms[8] = {};
    int path_at = 0;
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &begin, &end, perms, &path_at) < 3) continue;
    region.begin = begin;
    region.end = end;
    region.readable = perms[0] == 'r';
    region.writable = perms[1] == 'w';
    region.path = line + path_at;
    while (!region.path.empty() && (region.path.back() == '\n' || region.path.back() == ' ')) region.path.pop_back();
    out.push_back(region);
  }
  std::fclose(maps);
  return out;
}

inline const Region* region_of(const std::vector<Region>& all, const void* address) {
  const auto at = reinterpret_cast<uintptr_t>(address);
  for (const Region& region : all)
    if (at >= region.begin && at < region.end) return &region;
  return nullptr;
}

inline bool never_read(const Region& region) {
  return !region.readable || region.path == "[vvar]" || region.path == "[vsyscall]" || region.path == "[vvar_vclock]" ||
         region.path.rfind("/dev/", 0) == 0;
}

inline bool safe_to_read_directly(const Region& region) {
  return region.path.empty() || region.path == "[heap]" || region.path.rfind("[stack", 0) == 0 ||
         region.path.rfind("[anon", 0) == 0;
}

// Calls visit(address, bytes, size) for every readable byte of the process, in chunks that overlap by
// `overlap` bytes so that a pattern across a chunk boundary is seen whole. Stops after `limit` bytes.
// Returns how many bytes it read.
inline size_t each_chunk(const std::function<void(uintptr_t, const char*, size_t)>& visit, size_t overlap = 64,
                         size_t limit = size_t{16} << 30) {
  constexpr size_t kChunk = size_t{4} << 20;
  std::vector<char> buffer(kChunk + overlap);
  const int mem = ::open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
  size_t total = 0;
  for (const Region& region : regions()) {
    if (never_read(region) || (mem < 0 && !safe_to_read_directly(region))) continue;
    // The buffer this walk reads into would otherwise be found, as a copy of everything, by the walk.
    if (region.begin <= reinterpret_cast<uintptr_t>(buffer.data()) &&
        reinterpret_cast<uintptr_t>(buffer.data()) < region.end && region.end - region.begin <= buffer.size() + 8192)
      continue;
    for (uintptr_t at = region.begin; at < region.end && total < limit; at += kChunk) {
      const size_t want = size_t(std::min<uintptr_t>(region.end - at, kChunk + overlap));
      const char* bytes = nullptr;
      size_t got = 0;
      if (mem >= 0) {
        const ssize_t n = ::pread(mem, buffer.data(), want, off_t(at));
        if (n <= 0) continue;
        bytes = buffer.data();
        got = size_t(n);
      } else {
        bytes = reinterpret_cast<const char*>(at);
        got = want;
      }
      visit(at, bytes, got);
      total += got;
    }
  }
  if (mem >= 0) ::close(mem);
  return total;
}

}  // namespace scan
