// Cheats by writing past the end of its output (and before its start): the guards must see it.
#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& y = call->outputs[0];
  int64_t n = 1;
  for (int d = 0; d < y.rank; ++d) n *= y.shape[d];
  auto* data = static_cast<float*>(y.data);
  for (int64_t i = 0; i < n + 16; ++i) data[i] = 1.0f;
  data[-1] = 2.0f;
  return 0;
}
