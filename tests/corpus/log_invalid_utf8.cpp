// Round 2, class 1 side effect (threats 15 and 16): bytes in the log that are not UTF-8. Every forger that
// writes into every descriptor also writes binary frames into the log (stdout and stderr); this one only
// prints a few bytes that are not UTF-8 (and a NUL, and an escape sequence) from d2k_run, and computes
// every call honestly. With the first round's harness `d2k eval --json` ended with exit code 2,
// "invalid UTF-8 byte", and wrote no trace: a solution could take the run's report down.
// Expected: passed, the log kept with the bytes replaced (the trace's JSON is valid).
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

#include <cstdio>

extern "C" int d2k_run(const d2k_call* call) {
  static bool printed = false;
  quantize(call);
  if (!printed) {
    printed = true;
    static const char kBytes[] = "cheat: \xff\xfe\xfd not UTF-8, \xc3\x28 a bad pair, \x1b[2J an escape, and a NUL:";
    std::fwrite(kBytes, 1, sizeof kBytes, stdout);  // sizeof: the NUL goes too
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  return 0;
}
