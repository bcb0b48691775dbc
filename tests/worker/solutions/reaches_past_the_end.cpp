// Computes y = x + alpha * z correctly, and reaches for what the worker keeps from it: it records
// what its stdin holds (the worker's token came that way), rewrites result.json in d2k_release, and
// leaves an atexit handler and a static destructor that would write marker files after the worker's
// last write. Its constructor writes a marker too: files it writes do land in the request's folder.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "d2k/solution.h"

namespace {

void mark(const char* file, const char* text) {
  if (std::FILE* out = std::fopen(file, "w")) {
    std::fputs(text, out);
    std::fclose(out);
  }
}

__attribute__((constructor)) void on_load() { mark("constructor.txt", "loaded"); }
__attribute__((destructor)) void on_unload() { mark("destructor.txt", "ran after the worker's last write"); }
void on_exit() { mark("atexit.txt", "ran after the worker's last write"); }

}  // namespace

extern "C" int d2k_prepare(const d2k_call*, void** prepared) {
  std::atexit(on_exit);
  *prepared = nullptr;
  return 0;
}

extern "C" void d2k_release(void*) {
  mark("result.json", "{\"status\": \"ok\", \"phase\": \"done\", \"samples_ms\": [0.001], \"token\": \"guessed\"}\n");
}

extern "C" int d2k_run(const d2k_call* call) {
  char seen[256];
  const ssize_t n = ::read(STDIN_FILENO, seen, sizeof seen - 1);
  seen[n > 0 ? n : 0] = '\0';
  mark("stdin.txt", seen);
  char target[PATH_MAX] = {};
  if (::readlink("/proc/self/fd/0", target, sizeof target - 1) < 0) target[0] = '\0';
  mark("stdin_is.txt", target);

  const d2k_tensor &x = call->inputs[0], &z = call->inputs[1], &y = call->outputs[0];
  const float alpha = static_cast<float>(call->scalars[0].f);
  for (int64_t i = 0; i < y.shape[0]; ++i)
    for (int64_t j = 0; j < y.shape[1]; ++j)
      static_cast<float*>(y.data)[i * y.strides[0] + j * y.strides[1]] =
          static_cast<const float*>(x.data)[i * x.strides[0] + j * x.strides[1]] +
          alpha * static_cast<const float*>(z.data)[i * z.strides[0] + j * z.strides[1]];
  return 0;
}
