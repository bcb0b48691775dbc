// A correct CUDA solution: y = x + alpha * z on f32 tensors of rank up to 8 and any strides, on the
// stream the worker passes. It asks for a workspace too, so that a passing run shows the worker
// hands device memory of the asked size.
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

struct View {
  float* data;
  int rank;
  int64_t shape[D2K_MAX_RANK];
  int64_t strides[D2K_MAX_RANK];
};

View view_of(const d2k_tensor& t) {
  View v{static_cast<float*>(t.data), t.rank, {}, {}};
  for (int d = 0; d < t.rank; ++d) {
    v.shape[d] = t.shape[d];
    v.strides[d] = t.strides[d];
  }
  return v;
}

__device__ int64_t offset_of(const View& t, int64_t flat) {
  int64_t offset = 0;
  for (int d = t.rank - 1; d >= 0; --d) {
    offset += (flat % t.shape[d]) * t.strides[d];
    flat /= t.shape[d];
  }
  return offset;
}

__global__ void axpy(View x, View z, View y, float alpha, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    y.data[offset_of(y, i)] = x.data[offset_of(x, i)] + alpha * z.data[offset_of(z, i)];
  }
}

}  // namespace

extern "C" int d2k_workspace_size(const d2k_call* call, size_t* bytes) {
  *bytes = 1 << 20;
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  if (call->stream == nullptr || call->workspace == nullptr || call->workspace_bytes < (1 << 20)) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "no stream or no workspace");
    return 1;
  }
  if (call->num_inputs != 2 || call->num_outputs != 1 || call->num_scalars != 1 ||
      std::strcmp(call->scalars[0].name, "alpha") != 0) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "expected inputs x, z, output y and float alpha");
    return 1;
  }
  const d2k_tensor& y = call->outputs[0];
  int64_t n = 1;
  for (int d = 0; d < y.rank; ++d) n *= y.shape[d];
  auto stream = static_cast<cudaStream_t>(call->stream);
  axpy<<<64, 256, 0, stream>>>(view_of(call->inputs[0]), view_of(call->inputs[1]), view_of(y),
                               static_cast<float>(call->scalars[0].f), n);
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "launch failed: %s", cudaGetErrorString(error));
    return 1;
  }
  return 0;
}
