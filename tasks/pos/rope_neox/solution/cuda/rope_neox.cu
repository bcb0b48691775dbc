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

// Contiguous heads and table rows, every stride and pointer a multiple of 8 elements. A thread owns one
// 16-byte column v of a token's table row (cos at [8v, 8v + 8), sin half a row later) and applies it to
// kHeads heads of that token: it issues the 2 * kHeads loads of q and k (none waits on another) and the
// position, then the row's two loads, so one dependent round trip serves kHeads heads, and 32 bytes per
// head are in flight before the first computation. Threads are numbered (token, head group, v): the 8
// threads of a head half read 128 consecutive bytes. Offsets inside a token are 32-bit.
template <int kHeads>
__global__ void __launch_bounds__(kThreads) rope_vec(Args a, uint32_t vecs_per_half, uint32_t groups,
                                                     uint32_t threads_total) {
  const uint32_t id = blockIdx.x * kThreads + threadIdx.x;
  if (id >= threads_total) return;
  const uint32_t per_token = groups * vecs_per_half;
  const uint32_t token = id / per_token;
  const uint32_t rest = id - token * per_token;
  const uint32_t group = rest / vecs_per_half;
  const uint32_t column = (rest - group * vecs_per_half) * kVec;
  const uint32_t heads = a.q_heads + a.k_heads;
  __nv_bfloat16* const q = a.q + token * a.q_token;
  __nv_bfloat16* const k = a.k + token * a.k_token;
  const int64_t position = __ldg(a.positions + token * a.pos_stride);

  // Each head's place as a 32-bit offset from q or k (the head count decides which): fewer live registers
  // than a 64-bit pointer per head, so more threads fit an SM.
  Vec x[kHeads], y[kHeads];
  uint32_t offset[kHeads];
#pragma unroll
  for (int j = 0; j < kHeads; ++j) {
    const uint32_t head = group * kHeads + j;
    if (head >= heads) continue;
    offset[j] = head < static_cast<uint32_t>(a.q_heads) ? head * static_cast<uint32_t>(a.q_head) + column
                                                        : (head - a.q_heads) * static_cast<uint32_t>(a.k_head) + column;
    const __nv_bfloat16* at = (head < static_cast<uint32_t>(a.q_heads) ? q : k) + offset[j];
    x[j].word = *reinterpret_cast<const uint4*>(at);
    y[j].word = *reinterpret_cast<const uint4*>(at + a.half);
  }
  const __nv_bfloat16* row = a.cache + position * a.cache_row + column;
  Vec c, s;
  c.word = __ldg(reinterpret_cast<const uint4*>(row));
  s.word = __ldg(reinterpret_cast<const uint4*>(row + a.half));
#pragma unroll
  for (int j = 0; j < kHeads; ++j) {
    const uint32_t head = group * kHeads + j;
    if (head >= heads) continue;
#pragma unroll
    for (int p = 0; p < 4; ++p) rotate_pairs(x[j].pair[p], y[j].pair[p], c.pair[p], s.pair[p]);
    __nv_bfloat16* at = (head < static_cast<uint32_t>(a.q_heads) ? q : k) + offset[j];
    *reinterpret_cast<uint4*>(at) = x[j].word;
    *reinterpret_cast<uint4*>(at + a.half) = y[j].word;
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

template <int kHeads>
void launch_heads(const Args& a, cudaStream_t stream) {
  const auto vecs_per_half = static_cast<uint32_t>(a.half / kVec);
  const auto groups = static_cast<uint32_t>((a.q_heads + a.k_heads + kHeads - 1) / kHeads);
  const int64_t per_token = int64_t{groups} * vecs_per_half;
  // Slices of tokens whose thread count and in-token offsets stay below 2^31: 32-bit arithmetic inside.
  const int64_t tokens_per_slice = std::max<int64_t>(1, (int64_t{1} << 31) / per_token - 1);
  for (int64_t first = 0; first < a.tokens; first += tokens_per_slice) {
    const int64_t tokens = std::min(tokens_per_slice, a.tokens - first);
    Args slice = a;
    slice.positions += first * a.pos_stride;
    slice.q += first * a.q_token;
    slice.k += first * a.k_token;
    slice.tokens = tokens;
    const auto threads = static_cast<uint32_t>(tokens * per_token);
    rope_vec<kHeads><<<(threads + kThreads - 1) / kThreads, kThreads, 0, stream>>>(slice, vecs_per_half, groups, threads);
  }
}

// Four heads per thread where the head count allows it without idle slots, else fewer.
void launch_vec(const Args& a, cudaStream_t stream) {
  const int heads = a.q_heads + a.k_heads;
  if (heads % 4 == 0) return launch_heads<4>(a, stream);
  if (heads % 3 == 0) return launch_heads<3>(a, stream);
  if (heads % 2 == 0) return launch_heads<2>(a, stream);
  return launch_heads<4>(a, stream);
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
