// Expert CUDA solution of moe/sum_reduce for the H200 (sm_90a).
//
// Memory-bound: the floor is one read of the k expert outputs and one write of the sum (k + 1 bf16
// values moved per output element, one add each). The output is one flat range of V-element vectors; the
// thread that owns a vector issues the loads of all k experts' matching vectors before the first add (up to
// eight 16-byte loads in flight per thread, so that a few warps per SM already cover DRAM latency), sums
// them in fp32 in expert order, scales once and rounds once. V is the widest vector the width, the strides
// and the pointers allow; a last dimension that is not contiguous takes a plain strided kernel.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr int kThreads = 256;
constexpr int kExpertsInFlight = 8;  // loads issued before the first add; more experts loop in such groups

struct Args {
  const __nv_bfloat16* x;
  __nv_bfloat16* out;
  int64_t x_token, x_expert, x_col;  // strides of x, elements
  int64_t out_token, out_col;
  int64_t tokens, experts, width;    // T, k, H
  float scale;
};

template <int V> struct Word;
template <> struct Word<8> { using type = uint4; };
template <> struct Word<4> { using type = uint2; };
template <> struct Word<2> { using type = uint32_t; };

// V bf16 values as one machine word, viewed as bf16x2 bits.
template <int V>
union Pack {
  typename Word<V>::type word;
  uint32_t pair[V / 2];
};

__device__ __forceinline__ float2 unpack(uint32_t bits) {
  __nv_bfloat162 pair;
  memcpy(&pair, &bits, sizeof bits);
  return __bfloat1622float2(pair);
}

__device__ __forceinline__ uint32_t pack(float a, float b) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(a, b);
  uint32_t bits;
  memcpy(&bits, &pair, sizeof bits);
  return bits;
}

// Contiguous last dimension; the width, the token and expert strides and the pointers are multiples of V.
// `first` and `count` bound a slice of output vectors whose indices fit in 32 bits.
template <int V>
__global__ void __launch_bounds__(kThreads) sum_reduce_vec(Args args, int64_t first_token, uint32_t vecs_per_token,
                                                           uint32_t vecs) {
  using W = typename Word<V>::type;
  const uint32_t v = blockIdx.x * kThreads + threadIdx.x;
  if (v >= vecs) return;
  const uint32_t token = v / vecs_per_token;
  const uint32_t col = (v - token * vecs_per_token) * V;
  const __nv_bfloat16* in = args.x + (first_token + token) * args.x_token + col;
  float sum[V];
#pragma unroll
  for (int e = 0; e < V; ++e) sum[e] = 0.0f;
  for (int64_t group = 0; group < args.experts; group += kExpertsInFlight) {
    Pack<V> value[kExpertsInFlight];
#pragma unroll
    for (int j = 0; j < kExpertsInFlight; ++j)
      if (group + j < args.experts) value[j].word = __ldg(reinterpret_cast<const W*>(in + (group + j) * args.x_expert));
    // Added in expert order, after every load of the group was issued.
#pragma unroll
    for (int j = 0; j < kExpertsInFlight; ++j) {
      if (group + j >= args.experts) break;
#pragma unroll
      for (int p = 0; p < V / 2; ++p) {
        const float2 f = unpack(value[j].pair[p]);
        sum[2 * p] += f.x;
        sum[2 * p + 1] += f.y;
      }
    }
  }
  Pack<V> result;
#pragma unroll
  for (int p = 0; p < V / 2; ++p) result.pair[p] = pack(args.scale * sum[2 * p], args.scale * sum[2 * p + 1]);
  *reinterpret_cast<W*>(args.out + (first_token + token) * args.out_token + col) = result.word;
}

// Any strides and widths: one output element per thread, grid-stride.
__global__ void __launch_bounds__(kThreads) sum_reduce_strided(Args args) {
  const int64_t total = args.tokens * args.width;
  for (int64_t e = blockIdx.x * int64_t{kThreads} + threadIdx.x; e < total; e += int64_t{gridDim.x} * kThreads) {
    const int64_t token = e / args.width, col = e - token * args.width;
    float sum = 0.0f;
    for (int64_t j = 0; j < args.experts; ++j)
      sum += __bfloat162float(args.x[token * args.x_token + j * args.x_expert + col * args.x_col]);
    args.out[token * args.out_token + col * args.out_col] = __float2bfloat16_rn(args.scale * sum);
  }
}

int failed(const d2k_call* call, const char* what) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "sum_reduce (cuda): %s", what);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

// The widest vector (8, 4 or 2 elements) that the width, every stride and both pointers allow; 0: none.
int vector_width(const Args& a) {
  if (a.x_col != 1 || a.out_col != 1) return 0;
  for (int v : {8, 4, 2}) {
    const auto bytes = static_cast<uintptr_t>(2 * v);
    if (a.width % v == 0 && a.x_token % v == 0 && a.x_expert % v == 0 && a.out_token % v == 0 &&
        reinterpret_cast<uintptr_t>(a.x) % bytes == 0 && reinterpret_cast<uintptr_t>(a.out) % bytes == 0)
      return v;
  }
  return 0;
}

template <int V>
void launch_vec(const Args& args, cudaStream_t stream) {
  const auto vecs_per_token = static_cast<uint32_t>(args.width / V);
  const int64_t tokens_per_slice = std::max<int64_t>(1, (int64_t{1} << 31) / vecs_per_token - 1);
  for (int64_t first = 0; first < args.tokens; first += tokens_per_slice) {
    const auto vecs = static_cast<uint32_t>(std::min(tokens_per_slice, args.tokens - first) * vecs_per_token);
    sum_reduce_vec<V><<<(vecs + kThreads - 1) / kThreads, kThreads, 0, stream>>>(args, first, vecs_per_token, vecs);
  }
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* x = find(call->inputs, call->num_inputs, "x");
  const d2k_tensor* out = find(call->outputs, call->num_outputs, "out");
  if (!x || !out) return failed(call, "missing the input 'x' or the output 'out'");
  if (x->dtype != D2K_BFLOAT16 || x->rank != 3 || out->dtype != D2K_BFLOAT16 || out->rank != 2)
    return failed(call, "expects x [T, k, H] and out [T, H] in bf16");
  if (out->shape[0] != x->shape[0] || out->shape[1] != x->shape[2]) return failed(call, "out's shape is not [T, H]");
  const d2k_scalar* scale = nullptr;
  for (int32_t i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, "routed_scaling_factor") == 0) scale = &call->scalars[i];
  if (!scale) return failed(call, "missing the scalar 'routed_scaling_factor'");

  Args args;
  args.x = static_cast<const __nv_bfloat16*>(x->data);
  args.out = static_cast<__nv_bfloat16*>(out->data);
  args.x_token = x->strides[0];
  args.x_expert = x->strides[1];
  args.x_col = x->strides[2];
  args.out_token = out->strides[0];
  args.out_col = out->strides[1];
  args.tokens = x->shape[0];
  args.experts = x->shape[1];
  args.width = x->shape[2];
  args.scale = static_cast<float>(scale->f);
  if (args.tokens == 0 || args.width == 0) return 0;
  const auto stream = static_cast<cudaStream_t>(call->stream);
  switch (vector_width(args)) {
    case 8: launch_vec<8>(args, stream); break;
    case 4: launch_vec<4>(args, stream); break;
    case 2: launch_vec<2>(args, stream); break;
    default: {
      const int64_t blocks = std::min<int64_t>((args.tokens * args.width + kThreads - 1) / kThreads, 132 * 16);
      sum_reduce_strided<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args);
    }
  }
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return failed(call, cudaGetErrorString(error));
  return 0;
}
