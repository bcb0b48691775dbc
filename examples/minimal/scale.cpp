// The smallest solution: y = 2 * x for a float32 tensor, on the cpu device. It shows the whole ABI:
// read the descriptors, check what you rely on, fail with a message, compute into the output.
#include <cstdio>

#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  if (call->num_inputs != 1 || call->num_outputs != 1) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "expected one input and one output");
    return 1;
  }
  const d2k_tensor& x = call->inputs[0];
  const d2k_tensor& y = call->outputs[0];
  if (x.dtype != D2K_FLOAT32 || y.dtype != D2K_FLOAT32 || x.rank != 1 || x.strides[0] != 1 || y.strides[0] != 1) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "this example handles contiguous 1-D float32 only");
    return 1;
  }
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(y.data);
  for (int64_t i = 0; i < x.shape[0]; ++i) out[i] = 2.0f * in[i];
  return 0;
}
