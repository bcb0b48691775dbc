// Threat 14, files: a solution that reads the host at run time: the password file, root's home, the
// other requests beside its own (their inputs, a reference's outputs). Paired with the expert d2k_run.
// Every read must fail; one that succeeds is reported as an error (naming the path, never the bytes).
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "d2k/solution.h"

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  std::string got;
  for (const char* path : {"/etc/passwd", "/etc/shadow", "/etc/hostname"}) {
    int fd = ::open(path, O_RDONLY);
    if (fd < 0) continue;
    char byte;
    if (::read(fd, &byte, 1) == 1) got += std::string(got.empty() ? "" : ", ") + path;
    ::close(fd);
  }
  char cwd[4096] = "";
  if (::getcwd(cwd, sizeof cwd) == nullptr) cwd[0] = '\0';
  const std::string own = std::string(cwd).substr(std::string(cwd).rfind('/') + 1);
  for (const char* dir : {"..", "/root", "/home"}) {
    DIR* listing = ::opendir(dir);
    if (listing == nullptr) continue;
    int entries = 0;  // besides its own request folder
    while (dirent* entry = ::readdir(listing)) entries += entry->d_name[0] != '.' && entry->d_name != own;
    ::closedir(listing);
    if (entries > 0) got += std::string(got.empty() ? "" : ", ") + "listed " + dir;
  }
  if (got.empty()) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "escaped: read %s", got.c_str());
  return 1;
}

extern "C" void d2k_release(void*) {}
