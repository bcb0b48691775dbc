// What the round-2 spinning kernels share (ROUND2.md, class 6): a persistent kernel, launched once in
// d2k_prepare, that computes quant/fp8_group_quant's outputs over and over for whatever tensors a mailbox
// in mapped pinned host memory names. d2k_run only writes the mailbox (plain host stores: no launch, no
// API call for a timer to see) and returns; the spinner rewrites the outputs of the latest call whenever
// it comes round, outside every timed region, until its time budget runs out.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>

#include "d2k/solution.h"

struct Mailbox {
  unsigned long long generation;  // odd while the host is writing
  const __nv_bfloat16* x;
  int64_t xs0, xs1;
  __nv_fp8_e4m3* q;
  int64_t qs0, qs1;
  float* s;
  int64_t ss0, ss1;
  int64_t rows, groups;
  float eps;
  int ue8m0;
};

// One (row, group) by one block of 128 threads, as in honest_quant_cuda.cuh.
__device__ void quantize_group(const Mailbox& m, int64_t item) {
  __shared__ float amax_of[128];
  const int64_t t = item / m.groups, g = item % m.groups, k = g * 128 + threadIdx.x;
  const float v = __bfloat162float(m.x[t * m.xs0 + k * m.xs1]);
  amax_of[threadIdx.x] = fabsf(v);
  __syncthreads();
  for (int half = 64; half > 0; half /= 2) {
    if (threadIdx.x < half) amax_of[threadIdx.x] = fmaxf(amax_of[threadIdx.x], amax_of[threadIdx.x + half]);
    __syncthreads();
  }
  const float amax = fmaxf(amax_of[0], m.eps);
  float scale = amax / 448.0f;
  if (m.ue8m0) scale = exp2f(ceilf(log2f(scale)));
  if (threadIdx.x == 0) m.s[t * m.ss0 + g * m.ss1] = scale;
  m.q[t * m.qs0 + k * m.qs1] = __nv_fp8_e4m3(m.ue8m0 ? v / scale : v * (448.0f / amax));
  __syncthreads();
}

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Runs until budget_ns have passed: each pass reads the mailbox and rewrites the outputs it names.
__global__ void spin(const volatile Mailbox* mailbox, unsigned long long budget_ns) {
  const unsigned long long end = now_ns() + budget_ns;
  while (now_ns() < end) {
    __shared__ Mailbox m;
    __shared__ bool steady;
    if (threadIdx.x == 0) {
      const unsigned long long before = mailbox->generation;
      __threadfence_system();
      m.x = mailbox->x;
      m.xs0 = mailbox->xs0;
      m.xs1 = mailbox->xs1;
      m.q = mailbox->q;
      m.qs0 = mailbox->qs0;
      m.qs1 = mailbox->qs1;
      m.s = mailbox->s;
      m.ss0 = mailbox->ss0;
      m.ss1 = mailbox->ss1;
      m.rows = mailbox->rows;
      m.groups = mailbox->groups;
      m.eps = mailbox->eps;
      m.ue8m0 = mailbox->ue8m0;
      __threadfence_system();
      steady = (before & 1) == 0 && before != 0 && before == mailbox->generation;
    }
    __syncthreads();
    if (steady)
      for (int64_t item = blockIdx.x; item < m.rows * m.groups; item += gridDim.x) quantize_group(m, item);
    __syncthreads();
  }
}

inline double mailbox_scalar(const d2k_call* call, const char* name) {
  for (int i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, name) == 0)
      return call->scalars[i].kind == D2K_SCALAR_INT ? double(call->scalars[i].i) : call->scalars[i].f;
  return 0;
}

// Names the call's tensors in the mailbox, seqlock style: the spinner skips a half-written mailbox.
inline void publish(volatile Mailbox* mailbox, const d2k_call* call) {
  const d2k_tensor &x = call->inputs[0], &q = call->outputs[0], &s = call->outputs[1];
  mailbox->generation = mailbox->generation + 1;
  __sync_synchronize();
  mailbox->x = static_cast<const __nv_bfloat16*>(x.data);
  mailbox->xs0 = x.strides[0];
  mailbox->xs1 = x.strides[1];
  mailbox->q = static_cast<__nv_fp8_e4m3*>(q.data);
  mailbox->qs0 = q.strides[0];
  mailbox->qs1 = q.strides[1];
  mailbox->s = static_cast<float*>(s.data);
  mailbox->ss0 = s.strides[0];
  mailbox->ss1 = s.strides[1];
  mailbox->rows = x.shape[0];
  mailbox->groups = x.shape[1] / 128;
  mailbox->eps = float(mailbox_scalar(call, "eps"));
  mailbox->ue8m0 = mailbox_scalar(call, "ue8m0") != 0;
  __sync_synchronize();
  mailbox->generation = mailbox->generation + 1;
}
