// Computes y = x + alpha * z correctly, but leaves a detached thread running after the call returns
// (one that could do work while the next call is timed). The worker must reject it.
#include <chrono>
#include <thread>

#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor &x = call->inputs[0], &z = call->inputs[1], &y = call->outputs[0];
  const float alpha = static_cast<float>(call->scalars[0].f);
  for (int64_t i = 0; i < y.shape[0]; ++i)
    for (int64_t j = 0; j < y.shape[1]; ++j)
      static_cast<float*>(y.data)[i * y.strides[0] + j * y.strides[1]] =
          static_cast<const float*>(x.data)[i * x.strides[0] + j * x.strides[1]] +
          alpha * static_cast<const float*>(z.data)[i * z.strides[0] + j * z.strides[1]];
  std::thread([] { std::this_thread::sleep_for(std::chrono::milliseconds(500)); }).detach();
  return 0;
}
