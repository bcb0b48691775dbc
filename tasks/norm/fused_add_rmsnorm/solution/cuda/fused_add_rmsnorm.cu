// Expert CUDA solution of norm/fused_add_rmsnorm for the H200 (sm_90a).
//
// Memory-bound: the floor is one read and one write of x and of residual. A row (or, for small H, a
// warp's share of rows) is owned by one thread group that loads its x and residual slices once, in
// 16-byte vectors, forms and stores the rounded sum, reduces the sum of squares (warp shuffles, then one
// shared-memory exchange between warps), and normalizes the sum it still holds in registers. Nothing is
// read from DRAM twice. Layouts the vector path cannot take (a last dimension that is not contiguous,
// H not a multiple of 8, misaligned rows, very wide rows) go to a plain two-pass kernel that honours
// every stride.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include "d2k/solution.h"

namespace {

constexpr int kThreads = 256;      // every kernel: rows per CTA or threads per row are sized to it
constexpr int kBf16PerVec = 8;     // 16 bytes
constexpr int kMaxVecsPerThread = 16;

struct Args {
  const __nv_bfloat16* x_in;
  const __nv_bfloat16* res_in;
  const __nv_bfloat16* weight;
  __nv_bfloat16* x_out;
  __nv_bfloat16* res_out;
  int64_t x_in_row, res_in_row, x_out_row, res_out_row;  // row strides, elements
  int64_t x_in_col, res_in_col, x_out_col, res_out_col, weight_col;  // generic kernel only
  int64_t rows;
  int hidden;
  float eps;
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the CTA with a single barrier: every warp reduces the per-warp partials itself, so no
// second barrier is needed to broadcast the total.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  return warp_sum(lane < warps ? partial[lane] : 0.0f);
}

union Vec {
  uint4 raw;
  __nv_bfloat162 pair[4];
};

// Adds a vector of x to a vector of residual: the fp32 sum rounded to bf16. Returns the packed sums and
// accumulates their squares (of the rounded values, as the task specifies).
__device__ __forceinline__ uint4 add_round(uint4 x, uint4 r, float& sum_sq) {
  Vec a, b, s;
  a.raw = x;
  b.raw = r;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 fa = __bfloat1622float2(a.pair[j]);
    const float2 fb = __bfloat1622float2(b.pair[j]);
    s.pair[j] = __floats2bfloat162_rn(fa.x + fb.x, fa.y + fb.y);
    const float2 fs = __bfloat1622float2(s.pair[j]);
    sum_sq = fmaf(fs.x, fs.x, sum_sq);
    sum_sq = fmaf(fs.y, fs.y, sum_sq);
  }
  return s.raw;
}

// bf16(bf16(r * inv) * w), element by element.
__device__ __forceinline__ uint4 normalize(uint4 r, uint4 w, float inv) {
  Vec a, b, o;
  a.raw = r;
  b.raw = w;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 fr = __bfloat1622float2(a.pair[j]);
    const float2 fn = __bfloat1622float2(__floats2bfloat162_rn(fr.x * inv, fr.y * inv));
    const float2 fw = __bfloat1622float2(b.pair[j]);
    o.pair[j] = __floats2bfloat162_rn(fn.x * fw.x, fn.y * fw.y);
  }
  return o.raw;
}

// The vector path. kWarpPerRow: each warp owns one row (small H, several rows per CTA, reduction by
// shuffles only); otherwise the CTA owns one row. Each thread holds up to kVecs 16-byte vectors of the
// row, strided by the group size so that a group's accesses are contiguous.
template <int kVecs, bool kWarpPerRow>
__global__ void __launch_bounds__(kThreads) fused_add_rmsnorm_vec(Args a) {
  const int group_size = kWarpPerRow ? 32 : blockDim.x;
  const int first = kWarpPerRow ? (threadIdx.x & 31) : threadIdx.x;
  const int64_t row = kWarpPerRow ? int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5)
                                  : int64_t(blockIdx.x);
  if (kWarpPerRow && row >= a.rows) return;  // the whole warp leaves together; no CTA barrier follows
  const int vecs = a.hidden / kBf16PerVec;

  const uint4* x_in = reinterpret_cast<const uint4*>(a.x_in + row * a.x_in_row);
  const uint4* res_in = reinterpret_cast<const uint4*>(a.res_in + row * a.res_in_row);
  const uint4* weight = reinterpret_cast<const uint4*>(a.weight);
  uint4* x_out = reinterpret_cast<uint4*>(a.x_out + row * a.x_out_row);
  uint4* res_out = reinterpret_cast<uint4*>(a.res_out + row * a.res_out_row);

  // Small rows fetch the weight together with the activations so its latency hides behind theirs;
  // wide rows fetch it after the reduction to keep registers for the activations. Either way it comes
  // from L2: every row reads the same few kilobytes.
  constexpr bool kEarlyWeight = kVecs <= 4;

  uint4 xv[kVecs], rv[kVecs], wv[kEarlyWeight ? kVecs : 1];
  // Every load of the row is in flight before the first is used. Plain cached accesses: evict-first
  // hints on x and residual (ld/st .cs) measured 2-5% slower on the H200, not faster.
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int v = first + k * group_size;
    if (v < vecs) {
      xv[k] = x_in[v];
      rv[k] = res_in[v];
      if constexpr (kEarlyWeight) wv[k] = __ldg(weight + v);
    }
  }

  float sum_sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int v = first + k * group_size;
    if (v < vecs) {
      rv[k] = add_round(xv[k], rv[k], sum_sq);
      res_out[v] = rv[k];  // the new residual leaves while the reduction runs
    }
  }
  sum_sq = kWarpPerRow ? warp_sum(sum_sq) : block_sum(sum_sq);
  const float inv = rsqrtf(sum_sq / static_cast<float>(a.hidden) + a.eps);

#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int v = first + k * group_size;
    if (v < vecs) {
      uint4 w;
      if constexpr (kEarlyWeight) {
        w = wv[k];
      } else {
        w = __ldg(weight + v);
      }
      x_out[v] = normalize(rv[k], w, inv);
    }
  }
}

// Any layout: one CTA per row, element by element. The second pass reads back the rounded sums this
// thread itself wrote (same indices, program order), so no barrier beyond the reduction's is needed.
__global__ void __launch_bounds__(kThreads) fused_add_rmsnorm_strided(Args a) {
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* x_in = a.x_in + row * a.x_in_row;
  const __nv_bfloat16* res_in = a.res_in + row * a.res_in_row;
  __nv_bfloat16* x_out = a.x_out + row * a.x_out_row;
  __nv_bfloat16* res_out = a.res_out + row * a.res_out_row;

  float sum_sq = 0.0f;
  for (int i = threadIdx.x; i < a.hidden; i += blockDim.x) {
    const float sum = __bfloat162float(x_in[i * a.x_in_col]) + __bfloat162float(res_in[i * a.res_in_col]);
    const __nv_bfloat16 rounded = __float2bfloat16_rn(sum);
    res_out[i * a.res_out_col] = rounded;
    const float r = __bfloat162float(rounded);
    sum_sq = fmaf(r, r, sum_sq);
  }
  sum_sq = block_sum(sum_sq);
  const float inv = rsqrtf(sum_sq / static_cast<float>(a.hidden) + a.eps);
  for (int i = threadIdx.x; i < a.hidden; i += blockDim.x) {
    const float r = __bfloat162float(res_out[i * a.res_out_col]);
    const float n = __bfloat162float(__float2bfloat16_rn(r * inv));
    x_out[i * a.x_out_col] = __float2bfloat16_rn(n * __bfloat162float(a.weight[i * a.weight_col]));
  }
}

int fail(const d2k_call* call, const char* message) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "fused_add_rmsnorm (cuda): %s", message);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// The vector path needs contiguous rows of whole 16-byte vectors starting on 16-byte boundaries.
bool vector_layout_ok(const d2k_tensor& t, int64_t rows, int64_t hidden) {
  if (!aligned16(t.data)) return false;
  if (t.rank == 1) return t.strides[0] == 1 || hidden == 1;
  return (t.strides[1] == 1 || hidden == 1) && (rows == 1 || t.strides[0] % kBf16PerVec == 0);
}

template <int kVecs, bool kWarpPerRow>
void launch_vec(const Args& a, int threads, cudaStream_t stream) {
  const int64_t blocks = kWarpPerRow ? (a.rows + (threads / 32) - 1) / (threads / 32) : a.rows;
  fused_add_rmsnorm_vec<kVecs, kWarpPerRow><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(a);
}

// Picks the group shape. Rows of at most 32 * 4 vectors (H <= 1024) get a warp each. Wider rows get a
// CTA, with the fewest vectors per thread that fit in kThreads threads (H 4096: 2 per thread); the
// CTAs stay small so that several are resident per SM and keep enough bytes in flight.
bool launch_vector_path(const Args& a, cudaStream_t stream) {
  const int vecs = a.hidden / kBf16PerVec;
  if (vecs <= 128) {
    if (vecs <= 32) {
      launch_vec<1, true>(a, kThreads, stream);
    } else if (vecs <= 64) {
      launch_vec<2, true>(a, kThreads, stream);
    } else {
      launch_vec<4, true>(a, kThreads, stream);
    }
    return true;
  }
  for (int k = 1; k <= kMaxVecsPerThread; k *= 2) {
    const int needed = (vecs + k - 1) / k;
    if (needed > kThreads) continue;
    const int threads = (needed + 31) / 32 * 32;
    switch (k) {
      case 1: launch_vec<1, false>(a, threads, stream); break;
      case 2: launch_vec<2, false>(a, threads, stream); break;
      case 4: launch_vec<4, false>(a, threads, stream); break;
      case 8: launch_vec<8, false>(a, threads, stream); break;
      default: launch_vec<16, false>(a, threads, stream); break;
    }
    return true;
  }
  return false;  // wider than kThreads * kMaxVecsPerThread vectors (H > 32768)
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* x_in = find(call->inputs, call->num_inputs, "x");
  const d2k_tensor* res_in = find(call->inputs, call->num_inputs, "residual");
  const d2k_tensor* weight = find(call->inputs, call->num_inputs, "weight");
  const d2k_tensor* x_out = find(call->outputs, call->num_outputs, "x");
  const d2k_tensor* res_out = find(call->outputs, call->num_outputs, "residual");
  if (!x_in || !res_in || !weight) return fail(call, "expects inputs 'x', 'residual' and 'weight'");
  if (!x_out || !res_out) return fail(call, "expects outputs 'x' and 'residual'");
  for (const d2k_tensor* t : {x_in, res_in, x_out, res_out})
    if (t->dtype != D2K_BFLOAT16 || t->rank != 2) return fail(call, "x and residual must be rank-2 bf16");
  if (weight->dtype != D2K_BFLOAT16 || weight->rank != 1) return fail(call, "weight must be rank-1 bf16");
  const int64_t rows = x_in->shape[0];
  const int64_t hidden = x_in->shape[1];
  for (const d2k_tensor* t : {res_in, x_out, res_out})
    if (t->shape[0] != rows || t->shape[1] != hidden) return fail(call, "x and residual shapes differ");
  if (weight->shape[0] != hidden) return fail(call, "weight length differs from the hidden size");
  if (rows > INT32_MAX || hidden > INT32_MAX) return fail(call, "more than 2^31 - 1 rows or columns");

  double eps = -1.0;
  for (int32_t i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, "eps") == 0)
      eps = call->scalars[i].kind == D2K_SCALAR_FLOAT ? call->scalars[i].f : double(call->scalars[i].i);
  if (eps < 0.0) return fail(call, "missing or negative scalar 'eps'");
  if (rows == 0 || hidden == 0) return 0;

  Args a;
  a.x_in = static_cast<const __nv_bfloat16*>(x_in->data);
  a.res_in = static_cast<const __nv_bfloat16*>(res_in->data);
  a.weight = static_cast<const __nv_bfloat16*>(weight->data);
  a.x_out = static_cast<__nv_bfloat16*>(x_out->data);
  a.res_out = static_cast<__nv_bfloat16*>(res_out->data);
  a.x_in_row = x_in->strides[0];
  a.res_in_row = res_in->strides[0];
  a.x_out_row = x_out->strides[0];
  a.res_out_row = res_out->strides[0];
  a.x_in_col = x_in->strides[1];
  a.res_in_col = res_in->strides[1];
  a.x_out_col = x_out->strides[1];
  a.res_out_col = res_out->strides[1];
  a.weight_col = weight->strides[0];
  a.rows = rows;
  a.hidden = static_cast<int>(hidden);
  a.eps = static_cast<float>(eps);

  auto stream = static_cast<cudaStream_t>(call->stream);
  bool vector_ok = hidden % kBf16PerVec == 0;
  for (const d2k_tensor* t : {x_in, res_in, x_out, res_out, weight})
    vector_ok = vector_ok && vector_layout_ok(*t, rows, hidden);
  if (!vector_ok || !launch_vector_path(a, stream))
    fused_add_rmsnorm_strided<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(a);

  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "fused_add_rmsnorm (cuda): launch failed: %s",
                  cudaGetErrorString(status));
    return 1;
  }
  return 0;
}
