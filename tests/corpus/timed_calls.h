// How the round-2 cheats (ROUND2.md) tell the checked calls from the timed ones, as a cheater would
// without reading the worker: the checked calls (the second draw, its repeat, the first draw) all run
// in the same buffers, and input rotation hands the timed calls copies at other addresses; so every
// call from the first one on another input address on is taken for timed. With rotation off every call
// looks checked and such a cheat computes honestly throughout: run it with rotation on (the default).
#pragma once

#include "d2k/solution.h"

inline bool timing_started(const d2k_call* call) {
  static const void* first = nullptr;
  static bool started = false;
  if (first == nullptr) first = call->inputs[0].data;
  if (call->inputs[0].data != first) started = true;
  return started;
}
