// The control for tests/worker/test_hardening.cpp: linked with the linker's defaults, partial RELRO and
// lazy binding, as the worker was before issue 10. The ELF check must find it without BIND_NOW, and
// the GOT probe must find a writable slot (.got.plt) and write it; otherwise the checks could not fail.
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  std::printf("lazy program: %d argument(s), %s\n", argc, std::getenv("HOME") != nullptr ? "HOME set" : "no HOME");
  return 0;
}
