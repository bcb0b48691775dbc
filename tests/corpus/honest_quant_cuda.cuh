// An honest quant/fp8_group_quant on the cuda device (any strides), shared by the cuda cheats of the
// corpus: each cheat's d2k_run is this kernel plus its trick. Like honest_quant.h on the cpu device,
// a cheat that includes it is built as a folder solution with this header beside it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>

#include "d2k/solution.h"

// One block of 128 threads per (row, group): each thread one element, the amax by a shared reduction.
__global__ void quant_kernel(const __nv_bfloat16* x, int64_t xs0, int64_t xs1, __nv_fp8_e4m3* q, int64_t qs0,
                             int64_t qs1, float* s, int64_t ss0, int64_t ss1, int64_t groups, float eps, int ue8m0) {
  __shared__ float amax_of[128];
  const int64_t t = blockIdx.x / groups, g = blockIdx.x % groups, k = g * 128 + threadIdx.x;
  const float v = __bfloat162float(x[t * xs0 + k * xs1]);
  amax_of[threadIdx.x] = fabsf(v);
  __syncthreads();
  for (int half = 64; half > 0; half /= 2) {
    if (threadIdx.x < half) amax_of[threadIdx.x] = fmaxf(amax_of[threadIdx.x], amax_of[threadIdx.x + half]);
    __syncthreads();
  }
  const float amax = fmaxf(amax_of[0], eps);
  float scale = amax / 448.0f;
  if (ue8m0) scale = exp2f(ceilf(log2f(scale)));
  if (threadIdx.x == 0) s[t * ss0 + g * ss1] = scale;
  q[t * qs0 + k * qs1] = __nv_fp8_e4m3(ue8m0 ? v / scale : v * (448.0f / amax));
}

[[maybe_unused]] static double scalar(const d2k_call* call, const char* name) {
  for (int i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, name) == 0)
      return call->scalars[i].kind == D2K_SCALAR_INT ? double(call->scalars[i].i) : call->scalars[i].f;
  return 0;
}

[[maybe_unused]] static void quantize(const d2k_call* call, cudaStream_t stream) {
  const d2k_tensor &x = call->inputs[0], &q = call->outputs[0], &s = call->outputs[1];
  const int64_t groups = x.shape[1] / 128;
  quant_kernel<<<unsigned(x.shape[0] * groups), 128, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(x.data), x.strides[0], x.strides[1], static_cast<__nv_fp8_e4m3*>(q.data),
      q.strides[0], q.strides[1], static_cast<float*>(s.data), s.strides[0], s.strides[1], groups,
      float(scalar(call, "eps")), scalar(call, "ue8m0") != 0);
}

[[maybe_unused]] static size_t span_bytes(const d2k_tensor& t, size_t element) {
  int64_t last = 0;
  for (int d = 0; d < t.rank; ++d) last += (t.shape[d] - 1) * t.strides[d];
  return size_t(last + 1) * element;
}
