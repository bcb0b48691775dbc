// A correct in-place solution: x *= factor (an int scalar), on a contiguous i32 tensor that is both
// the input and the output.
#include <cstdio>

#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  if (call->num_outputs != 1 || call->num_inputs != 1 || call->outputs[0].data != call->inputs[0].data ||
      call->num_scalars != 1 || call->scalars[0].kind != D2K_SCALAR_INT) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "expected x in place and an int factor");
    return 1;
  }
  const d2k_tensor& x = call->outputs[0];
  int64_t n = 1;
  for (int d = 0; d < x.rank; ++d) n *= x.shape[d];
  auto* data = static_cast<int32_t*>(x.data);
  for (int64_t i = 0; i < n; ++i) data[i] *= static_cast<int32_t>(call->scalars[0].i);
  return 0;
}
