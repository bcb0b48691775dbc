// Expert CUDA solution of pos/rope_neox for the H200 (sm_90a).
//
// Memory-bound: each q and k element is read once and written once (4 bytes for 3 flops), plus one
// 256-byte table row per token. The work is one flat range of items, an item being one 16-byte vector of
// a head's first half together with the matching vector of its second half: (token, head of q or k,
// vector). A thread takes two items; it issues the loads of q and k and of the token's position first,
// then the table loads that depend on the position (so the two dependent DRAM round trips of the table
// overlap the q and k loads), rotates 8 pairs per item in fp32 with one rounding each, and stores both
// vectors back in place. The heads of a token are consecutive items, so their table row comes from DRAM
// once and from L1 for the rest. Layouts the 16-byte path cannot take (a last dimension that is not
// contiguous, strides or pointers not aligned to 8 elements) use a plain strided kernel.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr int kThreads = 256;
constexpr int kItemsPerThread = 2;  // items whose loads are in flight before the first computation
constexpr int kVec = 8;             // bf16 elements per 16-byte vector

struct Args {
  const int64_t* __restrict__ positions;
  __nv_bfloat16* q;
  __nv_bfloat16* k;
  const __nv_bfloat16* __restrict__ cache;
  int64_t pos_stride;
  int64_t q_token, q_head, q_elem;  // strides, elements
  int64_t k_token, k_head, k_elem;
  int64_t cache_row, cache_elem;
  int64_t tokens;
  int32_t q_heads, k_heads;
  int32_t half;  // D / 2: pairs per head, and the offset of the cos half's partner (the sin half)
};

__device__ __forceinline__ float2 widen(uint32_t bits) {
  __nv_bfloat162 pair;
  memcpy(&pair, &bits, sizeof bits);
  return __bfloat1622float2(pair);
}

__device__ __forceinline__ uint32_t narrow(float a, float b) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(a, b);
  uint32_t bits;
  memcpy(&bits, &pair, sizeof bits);
  return bits;
}

// x c - y s and y c + x s for two pairs at once. The products of two bf16 values are exact in fp32, so the
// fma rounds the exact result once in fp32 before the conversion rounds it to bf16.
__device__ __forceinline__ void rotate_pairs(uint32_t& x_bits, uint32_t& y_bits, uint32_t c_bits, uint32_t s_bits) {
  const float2 x = widen(x_bits), y = widen(y_bits), c = widen(c_bits), s = widen(s_bits);
  const float x0 = fmaf(x.x, c.x, -(y.x * s.x)), x1 = fmaf(x.y, c.y, -(y.y * s.y));
  const float y0 = fmaf(y.x, c.x, x.x * s.x), y1 = fmaf(y.y, c.y, x.y * s.y);
  x_bits = narrow(x0, x1);
  y_bits = narrow(y0, y1);
}

union Vec {
  uint4 word;
  uint32_t pair[4];
};

// Contiguous heads and table rows, every stride and pointer a multiple of 8 elements. Items of tokens
// [first_token, first_token + tokens) in a 32-bit flat index: per token, the heads of q, then those of k,
// each split into half / 8 vectors.
__global__ void __launch_bounds__(kThreads) rope_vec(Args a, int64_t first_token, uint32_t vecs_per_head,
                                                     uint32_t items_per_token, uint32_t items) {
  const uint32_t base = blockIdx.x * (kThreads * kItemsPerThread) + threadIdx.x;
  Vec x[kItemsPerThread], y[kItemsPerThread], c[kItemsPerThread], s[kItemsPerThread];
  __nv_bfloat16* head_at[kItemsPerThread];
  int64_t position[kItemsPerThread];
  uint32_t offset[kItemsPerThread];

  // q and k, and the positions: none depends on another load.
#pragma unroll
  for (int i = 0; i < kItemsPerThread; ++i) {
    const uint32_t item = base + i * kThreads;
    head_at[i] = nullptr;
    if (item >= items) continue;
    const uint32_t token = item / items_per_token;
    const uint32_t rest = item - token * items_per_token;
    const uint32_t head = rest / vecs_per_head;
    offset[i] = (rest - head * vecs_per_head) * kVec;
    const int64_t t = first_token + token;
    head_at[i] = head < static_cast<uint32_t>(a.q_heads)
                     ? a.q + t * a.q_token + head * a.q_head
                     : a.k + t * a.k_token + (head - a.q_heads) * a.k_head;
    x[i].word = *reinterpret_cast<const uint4*>(head_at[i] + offset[i]);
    y[i].word = *reinterpret_cast<const uint4*>(head_at[i] + a.half + offset[i]);
    position[i] = __ldg(a.positions + t * a.pos_stride);
  }
  // The table row of each item's token: cos at [offset, offset + 8), sin half a row later.
#pragma unroll
  for (int i = 0; i < kItemsPerThread; ++i) {
    if (!head_at[i]) continue;
    const __nv_bfloat16* row = a.cache + position[i] * a.cache_row + offset[i];
    c[i].word = __ldg(reinterpret_cast<const uint4*>(row));
    s[i].word = __ldg(reinterpret_cast<const uint4*>(row + a.half));
  }
#pragma unroll
  for (int i = 0; i < kItemsPerThread; ++i) {
    if (!head_at[i]) continue;
#pragma unroll
    for (int p = 0; p < 4; ++p) rotate_pairs(x[i].pair[p], y[i].pair[p], c[i].pair[p], s[i].pair[p]);
    *reinterpret_cast<uint4*>(head_at[i] + offset[i]) = x[i].word;
    *reinterpret_cast<uint4*>(head_at[i] + a.half + offset[i]) = y[i].word;
  }
}

// Any strides: one pair per thread, grid-stride.
__global__ void __launch_bounds__(kThreads) rope_strided(Args a) {
  const int64_t heads = a.q_heads + a.k_heads;
  const int64_t total = a.tokens * heads * a.half;
  for (int64_t e = blockIdx.x * int64_t{kThreads} + threadIdx.x; e < total; e += int64_t{gridDim.x} * kThreads) {
    const int64_t t = e / (heads * a.half);
    const int64_t rest = e - t * heads * a.half;
    const int64_t head = rest / a.half, i = rest - head * a.half;
    __nv_bfloat16* x;
    int64_t elem;
    if (head < a.q_heads) {
      x = a.q + t * a.q_token + head * a.q_head;
      elem = a.q_elem;
    } else {
      x = a.k + t * a.k_token + (head - a.q_heads) * a.k_head;
      elem = a.k_elem;
    }
    const __nv_bfloat16* row = a.cache + a.positions[t * a.pos_stride] * a.cache_row;
    const float c = __bfloat162float(row[i * a.cache_elem]), s = __bfloat162float(row[(a.half + i) * a.cache_elem]);
    const float u = __bfloat162float(x[i * elem]), v = __bfloat162float(x[(a.half + i) * elem]);
    x[i * elem] = __float2bfloat16_rn(fmaf(u, c, -(v * s)));
    x[(a.half + i) * elem] = __float2bfloat16_rn(fmaf(v, c, u * s));
  }
}

int failed(const d2k_call* call, const char* what) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "rope_neox (cuda): %s", what);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

bool aligned(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

bool vector_path(const Args& a) {
  return a.q_elem == 1 && a.k_elem == 1 && a.cache_elem == 1 && a.half % kVec == 0 && a.q_token % kVec == 0 &&
         a.q_head % kVec == 0 && a.k_token % kVec == 0 && a.k_head % kVec == 0 && a.cache_row % kVec == 0 &&
         aligned(a.q) && aligned(a.k) && aligned(a.cache);
}

void launch_vec(const Args& a, cudaStream_t stream) {
  const auto vecs_per_head = static_cast<uint32_t>(a.half / kVec);
  const auto items_per_token = static_cast<uint32_t>((a.q_heads + a.k_heads) * vecs_per_head);
  // Slices of tokens whose item count stays below 2^31: 32-bit index arithmetic in the kernel.
  const int64_t tokens_per_slice = std::max<int64_t>(1, (int64_t{1} << 31) / items_per_token - 1);
  for (int64_t first = 0; first < a.tokens; first += tokens_per_slice) {
    const int64_t tokens = std::min(tokens_per_slice, a.tokens - first);
    const auto items = static_cast<uint32_t>(tokens * items_per_token);
    const uint32_t blocks = (items + kThreads * kItemsPerThread - 1) / (kThreads * kItemsPerThread);
    rope_vec<<<blocks, kThreads, 0, stream>>>(a, first, vecs_per_head, items_per_token, items);
  }
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* positions = find(call->inputs, call->num_inputs, "positions");
  const d2k_tensor* cache = find(call->inputs, call->num_inputs, "cos_sin_cache");
  const d2k_tensor* q = find(call->outputs, call->num_outputs, "q");
  const d2k_tensor* k = find(call->outputs, call->num_outputs, "k");
  if (!positions || !cache || !q || !k) return failed(call, "missing positions, cos_sin_cache, q or k");
  if (positions->dtype != D2K_INT64 || positions->rank != 1) return failed(call, "positions must be rank-1 int64");
  if (cache->dtype != D2K_BFLOAT16 || cache->rank != 2) return failed(call, "cos_sin_cache must be rank-2 bf16");
  if (q->dtype != D2K_BFLOAT16 || k->dtype != D2K_BFLOAT16 || q->rank != 3 || k->rank != 3)
    return failed(call, "q and k must be rank-3 bf16");
  const int64_t tokens = positions->shape[0], head_size = cache->shape[1];
  if (q->shape[0] != tokens || k->shape[0] != tokens || q->shape[2] != head_size || k->shape[2] != head_size ||
      head_size % 2 != 0)
    return failed(call, "expects q [T, Hq, D], k [T, Hkv, D] and a table [M, D], D even");
  Args a;
  a.positions = static_cast<const int64_t*>(positions->data);
  a.q = static_cast<__nv_bfloat16*>(q->data);
  a.k = static_cast<__nv_bfloat16*>(k->data);
  a.cache = static_cast<const __nv_bfloat16*>(cache->data);
  a.pos_stride = positions->strides[0];
  a.q_token = q->strides[0], a.q_head = q->strides[1], a.q_elem = q->strides[2];
  a.k_token = k->strides[0], a.k_head = k->strides[1], a.k_elem = k->strides[2];
  a.cache_row = cache->strides[0], a.cache_elem = cache->strides[1];
  a.tokens = tokens;
  a.q_heads = static_cast<int32_t>(q->shape[1]);
  a.k_heads = static_cast<int32_t>(k->shape[1]);
  a.half = static_cast<int32_t>(head_size / 2);
  if (tokens == 0 || a.q_heads + a.k_heads == 0) return 0;
  const auto stream = static_cast<cudaStream_t>(call->stream);
  if (vector_path(a)) {
    launch_vec(a, stream);
  } else {
    const int64_t pairs = tokens * (a.q_heads + a.k_heads) * a.half;
    const int64_t blocks = std::min<int64_t>((pairs + kThreads - 1) / kThreads, 132 * 16);
    rope_strided<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  }
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return failed(call, cudaGetErrorString(error));
  return 0;
}
