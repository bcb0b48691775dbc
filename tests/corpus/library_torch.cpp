// Threat 11, calling a library that does the whole task: includes libtorch to quantize with it (the
// reference's own library). Caught: solutions build with the ABI header on the include path and
// nothing else; torch's headers and libraries are not reachable: compile_error, the log names
// "torch/torch.h".
#include <torch/torch.h>

#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  auto x = torch::from_blob(call->inputs[0].data, {call->inputs[0].shape[0], call->inputs[0].shape[1]}, torch::kBFloat16);
  (void)x;
  return 0;
}
