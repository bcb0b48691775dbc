// Expert CUDA solution of attn/merge_states for the H200 (sm_90a).
//
// Pure bandwidth: per (token, head) row, two rows of D bf16 values and two LSEs in, one row and one LSE
// out, three FLOPs per element. A row belongs to G = D / 32 consecutive lanes of a warp, each lane owning
// four 16-byte vectors of each part (32 elements), the vectors of one lane G vectors apart so that every
// load instruction of the group covers a contiguous 16 G bytes of the row. The group's first lane loads
// the row's two LSEs once, computes the weights and the merged LSE in fp32 and hands the weights to the
// others by shuffle. A part whose weight is 0 (an empty part, LSE +-inf, or one that underflows) is not
// read at all: its contribution is exactly 0. Then four 16-byte loads of each part are in flight per
// lane before the first use, the products and the sum are taken in fp32 and rounded once to bf16.
// Head sizes that are not 32 times a power of two up to 1024 take a plain kernel, one element per thread.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr int kThreads = 256;
constexpr int kVectors = 4;  // 16-byte vectors (8 bf16 values) of each part per lane

struct Args {
  const __nv_bfloat16* prefix_output;
  const float* prefix_lse;
  const __nv_bfloat16* suffix_output;
  const float* suffix_lse;
  __nv_bfloat16* output;
  float* output_lse;
  int64_t tokens, heads, dim;  // N, H, D
};

// The row's weights and merged LSE from its two LSEs (+inf means an empty part, as -inf does). Accurate
// expf and logf: they run once per row, next to 2 D loads.
struct Weights {
  float prefix, suffix, lse;
};

__device__ __forceinline__ Weights weigh(float a, float b) {
  const float inf = __int_as_float(0x7f800000);
  if (a == inf) a = -inf;
  if (b == inf) b = -inf;
  const float m = fmaxf(a, b);
  const float ea = expf(a - m), eb = expf(b - m);
  const float se = ea + eb;
  return {ea / se, eb / se, m + logf(se)};
}

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

// A 16-byte read-only load when `take`, zeros otherwise: one predicated instruction, no branch between
// the eight loads of a lane (a branch per part made the compiler wait for the prefix's loads before
// issuing the suffix's).
__device__ __forceinline__ uint4 load_if(const uint4* p, bool take) {
  uint4 v = make_uint4(0, 0, 0, 0);
  asm(
      "{\n\t.reg .pred take;\n\tsetp.ne.u32 take, %5, 0;\n\t"
      "@take ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n\t}"
      : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)
      : "l"(p), "r"(static_cast<uint32_t>(take)));
  return v;
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// G lanes per row, D = 32 G. Rows in the outputs' order (token-major), so that a block's loads cover a
// contiguous stretch of both parts; the LSEs [H, N] of neighbouring blocks share sectors in L2.
// The second launch bound (at least 4 blocks of 256 per SM) is what makes ptxas issue a lane's eight loads
// back to back (48 registers, 5 blocks resident): without it, it keeps 34-38 registers for occupancy and
// interleaves the loads with the arithmetic, two in flight per lane.
template <int G>
__global__ void __launch_bounds__(kThreads, 4) merge_rows(Args args) {
  const int64_t rows = args.tokens * args.heads;
  const int64_t row = (int64_t{blockIdx.x} * kThreads + threadIdx.x) / G;
  const int lane = threadIdx.x % G;
  const bool live = row < rows;

  Weights w{0.0f, 0.0f, 0.0f};
  if (live && lane == 0) {
    const int64_t token = row / args.heads, head = row - token * args.heads;
    const int64_t at = head * args.tokens + token;
    w = weigh(__ldg(args.prefix_lse + at), __ldg(args.suffix_lse + at));
    args.output_lse[at] = w.lse;
  }
  // Every lane of the warp takes part in the shuffles, rows past the end included.
  const float wa = __shfl_sync(0xffffffffu, w.prefix, 0, G);
  const float wb = __shfl_sync(0xffffffffu, w.suffix, 0, G);
  if (!live) return;

  const int64_t base = row * (G * kVectors) + lane;  // in 16-byte vectors
  const uint4* pa = reinterpret_cast<const uint4*>(args.prefix_output) + base;
  const uint4* pb = reinterpret_cast<const uint4*>(args.suffix_output) + base;
  // A part of weight 0 is not read: zeros stand for it, and 0 * 0 adds nothing, as 0 * (its finite
  // values) would.
  uint4 x[kVectors], y[kVectors];
#pragma unroll
  for (int k = 0; k < kVectors; ++k) x[k] = load_if(pa + k * G, wa != 0.0f);
#pragma unroll
  for (int k = 0; k < kVectors; ++k) y[k] = load_if(pb + k * G, wb != 0.0f);

  uint4* out = reinterpret_cast<uint4*>(args.output) + base;
#pragma unroll
  for (int k = 0; k < kVectors; ++k) {
    uint32_t merged[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 a = unpack(word(x[k], i)), b = unpack(word(y[k], i));
      merged[i] = pack(fmaf(wa, a.x, wb * b.x), fmaf(wa, a.y, wb * b.y));
    }
    out[k * G] = make_uint4(merged[0], merged[1], merged[2], merged[3]);
  }
}

// Any head size: one output element per thread, grid-stride; element 0 of a row writes its LSE.
__global__ void __launch_bounds__(kThreads) merge_elements(Args args) {
  const int64_t total = args.tokens * args.heads * args.dim;
  for (int64_t e = int64_t{blockIdx.x} * kThreads + threadIdx.x; e < total; e += int64_t{gridDim.x} * kThreads) {
    const int64_t row = e / args.dim, i = e - row * args.dim;
    const int64_t token = row / args.heads, head = row - token * args.heads;
    const int64_t at = head * args.tokens + token;
    const Weights w = weigh(__ldg(args.prefix_lse + at), __ldg(args.suffix_lse + at));
    const float a = w.prefix != 0.0f ? __bfloat162float(args.prefix_output[e]) : 0.0f;
    const float b = w.suffix != 0.0f ? __bfloat162float(args.suffix_output[e]) : 0.0f;
    args.output[e] = __float2bfloat16_rn(fmaf(w.prefix, a, w.suffix * b));
    if (i == 0) args.output_lse[at] = w.lse;
  }
}

int failed(const d2k_call* call, const char* what) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "merge_states (cuda): %s", what);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

// Contiguous, of this dtype and rank.
bool dense(const d2k_tensor* t, d2k_dtype dtype, int32_t rank) {
  if (!t || t->dtype != dtype || t->rank != rank) return false;
  int64_t stride = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    if (t->shape[d] != 1 && t->strides[d] != stride) return false;
    stride *= t->shape[d];
  }
  return true;
}

template <int G>
void launch_rows(const Args& args, cudaStream_t stream) {
  const int64_t threads = args.tokens * args.heads * G;
  merge_rows<G><<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0, stream>>>(args);
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* p_out = find(call->inputs, call->num_inputs, "prefix_output");
  const d2k_tensor* p_lse = find(call->inputs, call->num_inputs, "prefix_lse");
  const d2k_tensor* s_out = find(call->inputs, call->num_inputs, "suffix_output");
  const d2k_tensor* s_lse = find(call->inputs, call->num_inputs, "suffix_lse");
  const d2k_tensor* out = find(call->outputs, call->num_outputs, "output");
  const d2k_tensor* out_lse = find(call->outputs, call->num_outputs, "output_lse");
  if (!dense(p_out, D2K_BFLOAT16, 3) || !dense(s_out, D2K_BFLOAT16, 3) || !dense(out, D2K_BFLOAT16, 3))
    return failed(call, "expects prefix_output, suffix_output and output [N, H, D] bf16, contiguous");
  if (!dense(p_lse, D2K_FLOAT32, 2) || !dense(s_lse, D2K_FLOAT32, 2) || !dense(out_lse, D2K_FLOAT32, 2))
    return failed(call, "expects prefix_lse, suffix_lse and output_lse [H, N] fp32, contiguous");

  Args args;
  args.prefix_output = static_cast<const __nv_bfloat16*>(p_out->data);
  args.prefix_lse = static_cast<const float*>(p_lse->data);
  args.suffix_output = static_cast<const __nv_bfloat16*>(s_out->data);
  args.suffix_lse = static_cast<const float*>(s_lse->data);
  args.output = static_cast<__nv_bfloat16*>(out->data);
  args.output_lse = static_cast<float*>(out_lse->data);
  args.tokens = out->shape[0];
  args.heads = out->shape[1];
  args.dim = out->shape[2];
  if (args.tokens == 0 || args.heads == 0 || args.dim == 0) return 0;

  // The vector path needs 16-byte aligned rows: D = 32 G and aligned base pointers.
  bool aligned = true;
  for (const void* p : {static_cast<const void*>(args.prefix_output), static_cast<const void*>(args.suffix_output),
                        static_cast<const void*>(args.output)})
    aligned = aligned && reinterpret_cast<uintptr_t>(p) % 16 == 0;
  const auto stream = static_cast<cudaStream_t>(call->stream);
  switch (aligned ? args.dim : 0) {
    case 32: launch_rows<1>(args, stream); break;
    case 64: launch_rows<2>(args, stream); break;
    case 128: launch_rows<4>(args, stream); break;
    case 256: launch_rows<8>(args, stream); break;
    case 512: launch_rows<16>(args, stream); break;
    case 1024: launch_rows<32>(args, stream); break;
    default: {
      const int64_t total = args.tokens * args.heads * args.dim;
      const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 132 * 16);
      merge_elements<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args);
    }
  }
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return failed(call, cudaGetErrorString(error));
  return 0;
}
