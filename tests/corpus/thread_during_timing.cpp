// Threats 4 and 5 while timed: honest on the checked calls, but every timed call hands its work to a
// detached thread and returns at once, so the timer sees an empty call while the work runs on,
// overlapping the next sample's cache flush, and is done by the time the outputs are read.
// Caught: threads started through pthread_create are counted from start to end; after every timed
// call the count must be zero: rejected, "left a thread running after a timed call".
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

#include <thread>

extern "C" int d2k_run(const d2k_call* call) {
  static int calls = 0;
  if (++calls <= 3) {  // the second draw, its repeat and the first draw are checked
    quantize(call);
    return 0;
  }
  static d2k_call saved;
  saved = *call;
  std::thread([] { quantize(&saved); }).detach();
  return 0;
}
