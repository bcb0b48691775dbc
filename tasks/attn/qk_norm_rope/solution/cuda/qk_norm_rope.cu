// Expert CUDA solution of attn/qk_norm_rope for the H200 (sm_90a).
//
// Memory-bound: each q and k element is read once and written once (4 bytes for 7 flops), plus one
// 256-byte table row per token; v is never touched. A head of 128 values is held by 8 consecutive lanes,
// lane j holding the 16-byte vector j of the head's first half and vector j of its second half: the
// rotation's pairs (i, i + 64) then sit in the same thread, and only the sum of squares crosses lanes
// (three xor shuffles within the 8). The work is one flat range of items (token, head of q or k, vector);
// q's and k's heads are adjacent in a packed row, so a head's address is the row plus head * 128. Each
// thread takes two items: it loads both items' q/k vectors and positions first, then the table rows that
// depend on the positions (their latency overlaps the reduction), normalizes with the description's two
// roundings (bf16(x * inv), then times the weight, bf16), rotates in fp32 with one rounding, and stores the
// vectors back in place. Layouts the 16-byte path cannot take use a plain kernel of one head per thread.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr int kThreads = 256;
constexpr int kVec = 8;             // bf16 elements per 16-byte vector
constexpr int kHeadSize = 128;
constexpr int kHalf = kHeadSize / 2;
constexpr int kLanesPerHead = kHalf / kVec;  // 8

struct Args {
  __nv_bfloat16* qkv;
  const __nv_bfloat16* __restrict__ q_weight;
  const __nv_bfloat16* __restrict__ k_weight;
  const int64_t* __restrict__ positions;
  const __nv_bfloat16* __restrict__ cache;
  int64_t row_stride, elem_stride;  // qkv, elements
  int64_t q_weight_stride, k_weight_stride, pos_stride, cache_row, cache_elem;
  int64_t tokens;
  int32_t q_heads, k_heads;
  float eps;
};

union Vec {
  uint4 word;
  uint32_t pair[4];
};

__device__ __forceinline__ float2 widen(uint32_t bits) {
  __nv_bfloat162 pair;
  memcpy(&pair, &bits, sizeof bits);
  return __bfloat1622float2(pair);
}

__device__ __forceinline__ float round_bf16(float value) { return __bfloat162float(__float2bfloat16_rn(value)); }

__device__ __forceinline__ uint32_t narrow(float a, float b) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(a, b);
  uint32_t bits;
  memcpy(&bits, &pair, sizeof bits);
  return bits;
}

// a * b for two bf16 pairs, rounded once to bf16 (to nearest even).
__device__ __forceinline__ uint32_t multiply(uint32_t a_bits, uint32_t b_bits) {
  __nv_bfloat162 a, b;
  memcpy(&a, &a_bits, sizeof a_bits);
  memcpy(&b, &b_bits, sizeof b_bits);
  const __nv_bfloat162 product = __hmul2(a, b);
  uint32_t bits;
  memcpy(&bits, &product, sizeof bits);
  return bits;
}

// A thread owns lane j of 8 (vector j of both halves) of kHeads heads of one token, numbered (token, head
// group, lane): it issues the 2 * kHeads loads of q and k and the position (none waits on another), then
// the table row's two vectors, which serve all its heads, so 32 bytes per head are in flight before the
// first computation. Every lane of a warp runs the shuffles; lanes past the end, and heads past the
// token's last, carry zeros and store nothing (a head's 8 lanes are all in range or all out).
template <int kHeads>
__global__ void __launch_bounds__(kThreads, kHeads == 3 ? 3 : 1) qk_norm_rope_vec(Args a, uint32_t groups, uint32_t threads_total) {
  const uint32_t id = blockIdx.x * kThreads + threadIdx.x;
  const bool live = id < threads_total;
  const uint32_t per_token = groups * kLanesPerHead;
  const uint32_t token = id / per_token;
  const uint32_t rest = id - token * per_token;
  const uint32_t group = rest / kLanesPerHead;
  const uint32_t column = (rest - group * kLanesPerHead) * kVec;
  const uint32_t heads = a.q_heads + a.k_heads;
  __nv_bfloat16* const row = a.qkv + int64_t{token} * a.row_stride + column;
  // The two weights in shared memory, read at the rotation: loaded from global memory there, the compiler
  // hoists a vector pair per head to the top and the thread holds 32 more registers.
  __shared__ uint4 weights[2][kHeadSize / kVec];
  if (threadIdx.x < 2 * kHeadSize / kVec) {
    const uint32_t which = threadIdx.x / (kHeadSize / kVec), vector = threadIdx.x % (kHeadSize / kVec);
    weights[which][vector] = __ldg(reinterpret_cast<const uint4*>(which == 0 ? a.q_weight : a.k_weight) + vector);
  }

  Vec x[kHeads], y[kHeads];
#pragma unroll
  for (int j = 0; j < kHeads; ++j) {
    const uint32_t head = group * kHeads + j;
    x[j].word = y[j].word = make_uint4(0, 0, 0, 0);
    if (!live || head >= heads) continue;
    x[j].word = *reinterpret_cast<const uint4*>(row + head * kHeadSize);
    y[j].word = *reinterpret_cast<const uint4*>(row + head * kHeadSize + kHalf);
  }
  Vec c, s;
  if (live) {
    const int64_t position = __ldg(a.positions + int64_t{token} * a.pos_stride);
    const __nv_bfloat16* table = a.cache + position * a.cache_row + column;
    c.word = __ldg(reinterpret_cast<const uint4*>(table));
    s.word = __ldg(reinterpret_cast<const uint4*>(table + kHalf));
  }
  // Each head's sum of squares: this lane's 16 values, then the 8 lanes of the head.
  float inv[kHeads];
#pragma unroll
  for (int j = 0; j < kHeads; ++j) {
    float sum = 0.0f;
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 u = widen(x[j].pair[p]), v = widen(y[j].pair[p]);
      sum = fmaf(u.x, u.x, sum);
      sum = fmaf(u.y, u.y, sum);
      sum = fmaf(v.x, v.x, sum);
      sum = fmaf(v.y, v.y, sum);
    }
#pragma unroll
    for (int lanes = 1; lanes < kLanesPerHead; lanes *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, lanes);
    inv[j] = rsqrtf(sum * (1.0f / kHeadSize) + a.eps);
  }
  __syncthreads();
  if (!live) return;
#pragma unroll
  for (int j = 0; j < kHeads; ++j) {
    const uint32_t head = group * kHeads + j;
    if (head >= heads) continue;
    const uint4* weight = weights[head < static_cast<uint32_t>(a.q_heads) ? 0 : 1];
    Vec wx, wy;
    wx.word = weight[column / kVec];
    wy.word = weight[(column + kHalf) / kVec];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 u = widen(x[j].pair[p]), v = widen(y[j].pair[p]);
      // The normalized values rounded to bf16, times the weight in one bf16x2 multiply: the product of two
      // bf16 values is exact before its one rounding, so this is bf16(bf16(x * inv) * w).
      const float2 n = widen(multiply(narrow(u.x * inv[j], u.y * inv[j]), wx.pair[p]));
      const float2 m = widen(multiply(narrow(v.x * inv[j], v.y * inv[j]), wy.pair[p]));
      const float2 cp = widen(c.pair[p]), sp = widen(s.pair[p]);
      // The rotation: bf16 products exact in fp32, one rounding in the fma, one to bf16.
      x[j].pair[p] = narrow(fmaf(n.x, cp.x, -(m.x * sp.x)), fmaf(n.y, cp.y, -(m.y * sp.y)));
      y[j].pair[p] = narrow(fmaf(m.x, cp.x, n.x * sp.x), fmaf(m.y, cp.y, n.y * sp.y));
    }
    *reinterpret_cast<uint4*>(row + head * kHeadSize) = x[j].word;
    *reinterpret_cast<uint4*>(row + head * kHeadSize + kHalf) = y[j].word;
  }
}

// Any strides: one head per thread, grid-stride.
__global__ void __launch_bounds__(kThreads) qk_norm_rope_strided(Args a) {
  const int64_t heads = a.q_heads + a.k_heads;
  for (int64_t e = blockIdx.x * int64_t{kThreads} + threadIdx.x; e < a.tokens * heads; e += int64_t{gridDim.x} * kThreads) {
    const int64_t t = e / heads, head = e - t * heads;
    __nv_bfloat16* x = a.qkv + t * a.row_stride + head * kHeadSize * a.elem_stride;
    const __nv_bfloat16* w = head < a.q_heads ? a.q_weight : a.k_weight;
    const int64_t w_stride = head < a.q_heads ? a.q_weight_stride : a.k_weight_stride;
    const __nv_bfloat16* row = a.cache + a.positions[t * a.pos_stride] * a.cache_row;
    float sum = 0.0f;
    for (int j = 0; j < kHeadSize; ++j) {
      const float u = __bfloat162float(x[j * a.elem_stride]);
      sum = fmaf(u, u, sum);
    }
    const float inv = rsqrtf(sum * (1.0f / kHeadSize) + a.eps);
    for (int i = 0; i < kHalf; ++i) {
      const float n = round_bf16(round_bf16(__bfloat162float(x[i * a.elem_stride]) * inv) * __bfloat162float(w[i * w_stride]));
      const float m = round_bf16(round_bf16(__bfloat162float(x[(kHalf + i) * a.elem_stride]) * inv) *
                                 __bfloat162float(w[(kHalf + i) * w_stride]));
      const float c = __bfloat162float(row[i * a.cache_elem]), s = __bfloat162float(row[(kHalf + i) * a.cache_elem]);
      x[i * a.elem_stride] = __float2bfloat16_rn(fmaf(n, c, -(m * s)));
      x[(kHalf + i) * a.elem_stride] = __float2bfloat16_rn(fmaf(m, c, n * s));
    }
  }
}

int failed(const d2k_call* call, const char* what) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "qk_norm_rope (cuda): %s", what);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

const d2k_scalar* find_scalar(const d2k_call* call, const char* name) {
  for (int32_t i = 0; i < call->num_scalars; ++i)
    if (call->scalars[i].name && std::strcmp(call->scalars[i].name, name) == 0) return &call->scalars[i];
  return nullptr;
}

bool aligned(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

bool vector_path(const Args& a) {
  return a.elem_stride == 1 && a.cache_elem == 1 && a.q_weight_stride == 1 && a.k_weight_stride == 1 &&
         a.row_stride % kVec == 0 && a.cache_row % kVec == 0 && aligned(a.qkv) && aligned(a.cache) &&
         aligned(a.q_weight) && aligned(a.k_weight);
}

template <int kHeads>
void launch_heads(const Args& a, cudaStream_t stream) {
  const auto groups = static_cast<uint32_t>((a.q_heads + a.k_heads + kHeads - 1) / kHeads);
  const int64_t per_token = int64_t{groups} * kLanesPerHead;
  // Slices of tokens whose thread count stays below 2^31: 32-bit index arithmetic in the kernel.
  const int64_t tokens_per_slice = std::max<int64_t>(1, (int64_t{1} << 31) / per_token - 1);
  for (int64_t first = 0; first < a.tokens; first += tokens_per_slice) {
    Args slice = a;
    slice.tokens = std::min(tokens_per_slice, a.tokens - first);
    slice.qkv += first * a.row_stride;
    slice.positions += first * a.pos_stride;
    const auto threads = static_cast<uint32_t>(slice.tokens * per_token);
    qk_norm_rope_vec<kHeads><<<(threads + kThreads - 1) / kThreads, kThreads, 0, stream>>>(slice, groups, threads);
  }
}

// Three heads per thread where the head count allows it without idle slots (held to 80 registers, no
// spills, for 3 blocks per SM: 72 KB of q and k in flight per SM; at its own 82 it got 2), else four
// (98 registers, 2 blocks: 64 KB), else two (66, 3: 48 KB).
void launch_vec(const Args& a, cudaStream_t stream) {
  const int heads = a.q_heads + a.k_heads;
  if (heads % 3 == 0) return launch_heads<3>(a, stream);
  if (heads % 4 == 0) return launch_heads<4>(a, stream);
  if (heads % 2 == 0) return launch_heads<2>(a, stream);
  return launch_heads<4>(a, stream);
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* q_weight = find(call->inputs, call->num_inputs, "q_weight");
  const d2k_tensor* k_weight = find(call->inputs, call->num_inputs, "k_weight");
  const d2k_tensor* positions = find(call->inputs, call->num_inputs, "positions");
  const d2k_tensor* cache = find(call->inputs, call->num_inputs, "cos_sin_cache");
  const d2k_tensor* qkv = find(call->outputs, call->num_outputs, "qkv");
  const d2k_scalar* eps = find_scalar(call, "eps");
  const d2k_scalar* heads_q = find_scalar(call, "num_heads_q");
  const d2k_scalar* heads_kv = find_scalar(call, "num_heads_kv");
  if (!q_weight || !k_weight || !positions || !cache || !qkv || !eps || !heads_q || !heads_kv)
    return failed(call, "missing qkv, a weight, positions, cos_sin_cache or a scalar");
  if (qkv->dtype != D2K_BFLOAT16 || qkv->rank != 2 || q_weight->dtype != D2K_BFLOAT16 || k_weight->dtype != D2K_BFLOAT16 ||
      cache->dtype != D2K_BFLOAT16 || cache->rank != 2 || positions->dtype != D2K_INT64 || positions->rank != 1)
    return failed(call, "expects bf16 qkv [T, W], weights and table, int64 positions [T]");
  if (cache->shape[1] != kHeadSize || q_weight->shape[0] != kHeadSize || k_weight->shape[0] != kHeadSize)
    return failed(call, "this kernel is written for heads of 128");
  Args a;
  a.qkv = static_cast<__nv_bfloat16*>(qkv->data);
  a.q_weight = static_cast<const __nv_bfloat16*>(q_weight->data);
  a.k_weight = static_cast<const __nv_bfloat16*>(k_weight->data);
  a.positions = static_cast<const int64_t*>(positions->data);
  a.cache = static_cast<const __nv_bfloat16*>(cache->data);
  a.row_stride = qkv->strides[0], a.elem_stride = qkv->strides[1];
  a.q_weight_stride = q_weight->strides[0], a.k_weight_stride = k_weight->strides[0];
  a.pos_stride = positions->strides[0];
  a.cache_row = cache->strides[0], a.cache_elem = cache->strides[1];
  a.tokens = qkv->shape[0];
  a.q_heads = static_cast<int32_t>(heads_q->i);
  a.k_heads = static_cast<int32_t>(heads_kv->i);
  a.eps = static_cast<float>(eps->f);
  if ((int64_t{a.q_heads} + 2 * a.k_heads) * kHeadSize != qkv->shape[1] || positions->shape[0] != a.tokens)
    return failed(call, "qkv rows must hold (num_heads_q + 2 num_heads_kv) heads, one position per row");
  if (a.tokens == 0) return 0;
  const auto stream = static_cast<cudaStream_t>(call->stream);
  if (vector_path(a)) {
    launch_vec(a, stream);
  } else {
    const int64_t heads = a.tokens * (a.q_heads + a.k_heads);
    const int64_t blocks = std::min<int64_t>((heads + kThreads - 1) / kThreads, 132 * 16);
    qk_norm_rope_strided<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  }
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return failed(call, cudaGetErrorString(error));
  return 0;
}
