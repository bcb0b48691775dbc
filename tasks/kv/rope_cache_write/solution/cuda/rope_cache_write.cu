// Expert CUDA solution of kv/rope_cache_write for the H200 (sm_90a).
//
// Memory-bound: q and k are read and written once, v read once, and each valid token's k and v rows are
// written once into their cache slot; the rest of the cache is never touched. One kernel over a flat range
// of items, an item being one 16-byte vector of a head's first half with the matching vector of its second
// half, numbered token by token over the heads of q, then of k, then of v. A thread takes two items: it
// issues the q/k/v loads and the token's position and slot first, then the table loads that depend on the
// position, rotates q and k items in fp32 (one rounding to bf16) and stores them in place; a k item whose
// slot is not -1 stores its rounded bf16 vectors into the key cache too (or their fp8 codes: the bf16
// values divided by k_scale, IEEE division, saturating round-to-nearest-even conversion), a v item its
// values into the value cache. The cache's row for slot s starts at s * Hkv * D * E bytes whatever the
// block size, so an item's cache address is one multiply-add from its slot. Layouts the 16-byte path
// cannot take use a plain strided kernel with the same arithmetic.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
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
  const int64_t* __restrict__ slots;
  __nv_bfloat16* q;
  __nv_bfloat16* k;
  const __nv_bfloat16* __restrict__ v;
  const __nv_bfloat16* __restrict__ table;
  uint8_t* key_cache;
  uint8_t* value_cache;
  const float* __restrict__ k_scale;
  const float* __restrict__ v_scale;
  int64_t pos_stride, slot_stride;
  int64_t q_token, q_head, q_elem;  // strides, elements
  int64_t k_token, k_head, k_elem;
  int64_t v_token, v_head, v_elem;
  int64_t table_row, table_elem;
  int64_t tokens;
  int32_t q_heads, kv_heads;
  int32_t half;  // D / 2: pairs per head
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

// x c - y s and y c + x s for two pairs. The products of two bf16 values are exact in fp32, so each fma
// rounds the exact result once in fp32 before the conversion rounds it to bf16.
__device__ __forceinline__ void rotate_pairs(uint32_t& x_bits, uint32_t& y_bits, uint32_t c_bits, uint32_t s_bits) {
  const float2 x = widen(x_bits), y = widen(y_bits), c = widen(c_bits), s = widen(s_bits);
  const float x0 = fmaf(x.x, c.x, -(y.x * s.x)), x1 = fmaf(x.y, c.y, -(y.y * s.y));
  const float y0 = fmaf(y.x, c.x, x.x * s.x), y1 = fmaf(y.y, c.y, x.y * s.y);
  x_bits = narrow(x0, x1);
  y_bits = narrow(y0, y1);
}

// x / scale correctly rounded in fp32 without a division: q = x * (1 / scale), then one correction with the
// exact residual x - q * scale (Markstein: with a correctly rounded reciprocal and q within an ulp, the
// corrected quotient is correctly rounded wherever nothing underflows; below 2^-60 it may be an ulp off,
// and every such value still converts to an fp8 zero of the same sign). A zero residual keeps q (and the
// sign of a zero); an infinite q (overflow) stays, and saturates.
struct Divisor {
  float value, reciprocal;
};

__device__ __forceinline__ float divide(float x, Divisor d) {
  const float q = x * d.reciprocal;
  const float residual = fmaf(-q, d.value, x);
  return residual == 0.0f || isinf(q) ? q : fmaf(residual, d.reciprocal, q);
}

// Two bf16 values -> two fp8 e4m3fn codes (first in the low byte): value / scale correctly rounded in fp32,
// then the saturating round-to-nearest-even conversion (vLLM's scaled_convert).
__device__ __forceinline__ uint32_t fp8_pair(uint32_t bits, Divisor scale) {
  const float2 x = widen(bits);
  return __nv_cvt_float2_to_fp8x2(make_float2(divide(x.x, scale), divide(x.y, scale)), __NV_SATFINITE, __NV_E4M3);
}

union Vec {
  uint4 word;
  uint32_t pair[4];
};

// Stores a head's two 8-element vectors (at element offsets `offset` and `half + offset`) into a cache row:
// as they are, or as fp8 codes (8 bytes each).
template <bool kFp8>
__device__ __forceinline__ void store_cache(uint8_t* head_row, int32_t half, uint32_t offset, const Vec& x,
                                            const Vec& y, Divisor scale) {
  if constexpr (kFp8) {
    uint2 fx, fy;
    fx.x = fp8_pair(x.pair[0], scale) | (fp8_pair(x.pair[1], scale) << 16);
    fx.y = fp8_pair(x.pair[2], scale) | (fp8_pair(x.pair[3], scale) << 16);
    fy.x = fp8_pair(y.pair[0], scale) | (fp8_pair(y.pair[1], scale) << 16);
    fy.y = fp8_pair(y.pair[2], scale) | (fp8_pair(y.pair[3], scale) << 16);
    *reinterpret_cast<uint2*>(head_row + offset) = fx;
    *reinterpret_cast<uint2*>(head_row + half + offset) = fy;
  } else {
    *reinterpret_cast<uint4*>(head_row + 2 * offset) = x.word;
    *reinterpret_cast<uint4*>(head_row + 2 * (half + offset)) = y.word;
  }
}

// The head of q, k or v number `head` of one token (heads numbered q, then k, then v).
__device__ __forceinline__ const __nv_bfloat16* head_of(const Args& a, uint32_t token, uint32_t head) {
  const uint32_t rotated = a.q_heads + a.kv_heads;
  if (head < static_cast<uint32_t>(a.q_heads)) return a.q + token * a.q_token + head * a.q_head;
  if (head < rotated) return a.k + token * a.k_token + (head - a.q_heads) * a.k_head;
  return a.v + token * a.v_token + (head - rotated) * a.v_head;
}

// Contiguous heads, every stride and pointer a multiple of 8 elements. A thread owns one 16-byte column of
// a token's heads (vector j of both halves) for kHeads consecutive heads of the token, numbered (token,
// head group, column): it issues the 2 * kHeads loads of q, k or v, the position and the slot (none waits on
// another), then the table row's two vectors, which serve all its rotated heads: one dependent round trip
// for kHeads heads, and 32 bytes per head in flight before the first computation.
template <bool kFp8, int kHeads>
__global__ void __launch_bounds__(kThreads) rope_cache_vec(Args a, uint32_t vecs_per_half, uint32_t groups,
                                                           uint32_t threads_total) {
  constexpr int64_t kBytes = kFp8 ? 1 : 2;
  const uint32_t id = blockIdx.x * kThreads + threadIdx.x;
  if (id >= threads_total) return;
  const uint32_t per_token = groups * vecs_per_half;
  const uint32_t token = id / per_token;
  const uint32_t rest = id - token * per_token;
  const uint32_t group = rest / vecs_per_half;
  const uint32_t column = (rest - group * vecs_per_half) * kVec;
  const uint32_t rotated = a.q_heads + a.kv_heads, heads = rotated + a.kv_heads;
  const uint32_t first = group * kHeads;
  const bool any_rotated = first < rotated, any_cached = first + kHeads > static_cast<uint32_t>(a.q_heads);

  Vec x[kHeads], y[kHeads];
#pragma unroll
  for (int j = 0; j < kHeads; ++j) {
    if (first + j >= heads) continue;
    const __nv_bfloat16* from = head_of(a, token, first + j) + column;
    x[j].word = *reinterpret_cast<const uint4*>(from);
    y[j].word = *reinterpret_cast<const uint4*>(from + a.half);
  }
  const int64_t slot = any_cached ? __ldg(a.slots + int64_t{token} * a.slot_stride) : -1;
  Vec c, s;
  if (any_rotated) {
    const int64_t position = __ldg(a.positions + int64_t{token} * a.pos_stride);
    const __nv_bfloat16* row = a.table + position * a.table_row + column;
    c.word = __ldg(reinterpret_cast<const uint4*>(row));
    s.word = __ldg(reinterpret_cast<const uint4*>(row + a.half));
  }
  Divisor k_scale{1.0f, 1.0f}, v_scale{1.0f, 1.0f};
  if constexpr (kFp8) {
    k_scale.value = __ldg(a.k_scale);
    v_scale.value = __ldg(a.v_scale);
    k_scale.reciprocal = __frcp_rn(k_scale.value);
    v_scale.reciprocal = __frcp_rn(v_scale.value);
  }
  const int64_t row_elements = static_cast<int64_t>(a.kv_heads) * 2 * a.half;  // Hkv * D
#pragma unroll
  for (int j = 0; j < kHeads; ++j) {
    const uint32_t head = first + j;
    if (head >= heads) continue;
    if (head < rotated) {
#pragma unroll
      for (int p = 0; p < 4; ++p) rotate_pairs(x[j].pair[p], y[j].pair[p], c.pair[p], s.pair[p]);
      auto* in_place = const_cast<__nv_bfloat16*>(head_of(a, token, head)) + column;
      *reinterpret_cast<uint4*>(in_place) = x[j].word;
      *reinterpret_cast<uint4*>(in_place + a.half) = y[j].word;
    }
    if (head < static_cast<uint32_t>(a.q_heads) || slot < 0) continue;  // a q head, or a padding token
    const bool is_k = head < rotated;
    const uint32_t kv_head = head - (is_k ? a.q_heads : rotated);
    uint8_t* head_row = (is_k ? a.key_cache : a.value_cache) + (slot * row_elements + kv_head * 2 * a.half) * kBytes;
    store_cache<kFp8>(head_row, a.half, column, x[j], y[j], is_k ? k_scale : v_scale);
  }
}

// Any strides of q, k, v and the table: one pair (i, i + D/2) of one head per thread, grid-stride; the
// caches contiguous.
template <bool kFp8>
__global__ void __launch_bounds__(kThreads) rope_cache_strided(Args a) {
  const int64_t rotated_heads = a.q_heads + a.kv_heads, heads = rotated_heads + a.kv_heads;
  const int64_t total = a.tokens * heads * a.half;
  const int64_t row_elements = static_cast<int64_t>(a.kv_heads) * 2 * a.half;
  for (int64_t e = blockIdx.x * int64_t{kThreads} + threadIdx.x; e < total; e += int64_t{gridDim.x} * kThreads) {
    const int64_t t = e / (heads * a.half);
    const int64_t rest = e - t * heads * a.half;
    const int64_t head = rest / a.half, i = rest - head * a.half;
    float u, w;  // the pair's two values, rotated for q and k
    if (head < rotated_heads) {
      __nv_bfloat16* x;
      int64_t elem;
      if (head < a.q_heads) {
        x = a.q + t * a.q_token + head * a.q_head;
        elem = a.q_elem;
      } else {
        x = a.k + t * a.k_token + (head - a.q_heads) * a.k_head;
        elem = a.k_elem;
      }
      const __nv_bfloat16* row = a.table + a.positions[t * a.pos_stride] * a.table_row;
      const float c = __bfloat162float(row[i * a.table_elem]), s = __bfloat162float(row[(a.half + i) * a.table_elem]);
      const float x0 = __bfloat162float(x[i * elem]), y0 = __bfloat162float(x[(a.half + i) * elem]);
      const __nv_bfloat16 xr = __float2bfloat16_rn(fmaf(x0, c, -(y0 * s)));
      const __nv_bfloat16 yr = __float2bfloat16_rn(fmaf(y0, c, x0 * s));
      x[i * elem] = xr;
      x[(a.half + i) * elem] = yr;
      if (head < a.q_heads) continue;
      u = __bfloat162float(xr);
      w = __bfloat162float(yr);
    } else {
      const __nv_bfloat16* x = a.v + t * a.v_token + (head - rotated_heads) * a.v_head;
      u = __bfloat162float(x[i * a.v_elem]);
      w = __bfloat162float(x[(a.half + i) * a.v_elem]);
    }
    const int64_t slot = a.slots[t * a.slot_stride];
    if (slot < 0) continue;
    const bool is_k = head < rotated_heads;
    const int64_t at = slot * row_elements + (head - (is_k ? a.q_heads : rotated_heads)) * 2 * a.half + i;
    if constexpr (kFp8) {
      const float scale = is_k ? *a.k_scale : *a.v_scale;
      const uint32_t codes = __nv_cvt_float2_to_fp8x2(make_float2(__fdiv_rn(u, scale), __fdiv_rn(w, scale)),
                                                      __NV_SATFINITE, __NV_E4M3);
      uint8_t* cache = is_k ? a.key_cache : a.value_cache;
      cache[at] = static_cast<uint8_t>(codes);
      cache[at + a.half] = static_cast<uint8_t>(codes >> 8);
    } else {
      auto* cache = reinterpret_cast<__nv_bfloat16*>(is_k ? a.key_cache : a.value_cache);
      cache[at] = __float2bfloat16_rn(u);  // exact: u and w are bf16 values
      cache[at + a.half] = __float2bfloat16_rn(w);
    }
  }
}

int failed(const d2k_call* call, const char* what) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "rope_cache_write (cuda): %s", what);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

bool aligned(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

// 16-byte loads of q, k, v and the table; the cache rows then take 16-byte (bf16) or 8-byte (fp8) stores at
// multiples of their size, since D is a multiple of 16 and the caches are aligned.
bool vector_path(const Args& a) {
  const int64_t strides[] = {a.q_token, a.q_head, a.k_token, a.k_head, a.v_token, a.v_head, a.table_row};
  for (const int64_t stride : strides)
    if (stride % kVec != 0) return false;
  return a.q_elem == 1 && a.k_elem == 1 && a.v_elem == 1 && a.table_elem == 1 && a.half % kVec == 0 &&
         aligned(a.q) && aligned(a.k) && aligned(a.v) && aligned(a.table) && aligned(a.key_cache) &&
         aligned(a.value_cache);
}

template <bool kFp8, int kHeads>
void launch_heads(const Args& a, cudaStream_t stream) {
  const auto vecs_per_half = static_cast<uint32_t>(a.half / kVec);
  const auto groups = static_cast<uint32_t>((a.q_heads + 2 * a.kv_heads + kHeads - 1) / kHeads);
  const int64_t per_token = int64_t{groups} * vecs_per_half;
  // Slices of tokens whose thread count stays below 2^31: 32-bit index arithmetic in the kernel.
  const int64_t tokens_per_slice = std::max<int64_t>(1, (int64_t{1} << 31) / per_token - 1);
  for (int64_t first = 0; first < a.tokens; first += tokens_per_slice) {
    Args slice = a;
    slice.tokens = std::min(tokens_per_slice, a.tokens - first);
    slice.positions += first * a.pos_stride;
    slice.slots += first * a.slot_stride;
    slice.q += first * a.q_token;
    slice.k += first * a.k_token;
    slice.v += first * a.v_token;
    const auto threads = static_cast<uint32_t>(slice.tokens * per_token);
    rope_cache_vec<kFp8, kHeads><<<(threads + kThreads - 1) / kThreads, kThreads, 0, stream>>>(slice, vecs_per_half,
                                                                                             groups, threads);
  }
}

// Four heads per thread where the head counts allow it without idle slots or a group that mixes q, k
// and v, else fewer.
template <bool kFp8>
void launch(const Args& a, cudaStream_t stream) {
  if (a.q_heads % 4 == 0 && a.kv_heads % 4 == 0) return launch_heads<kFp8, 4>(a, stream);
  if (a.q_heads % 2 == 0 && a.kv_heads % 2 == 0) return launch_heads<kFp8, 2>(a, stream);
  return launch_heads<kFp8, 1>(a, stream);
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* positions = find(call->inputs, call->num_inputs, "positions");
  const d2k_tensor* table = find(call->inputs, call->num_inputs, "cos_sin_cache");
  const d2k_tensor* slots = find(call->inputs, call->num_inputs, "slot_mapping");
  const d2k_tensor* v = find(call->inputs, call->num_inputs, "v");
  const d2k_tensor* k_scale = find(call->inputs, call->num_inputs, "k_scale");
  const d2k_tensor* v_scale = find(call->inputs, call->num_inputs, "v_scale");
  const d2k_tensor* q = find(call->outputs, call->num_outputs, "q");
  const d2k_tensor* k = find(call->outputs, call->num_outputs, "k");
  const d2k_tensor* key_cache = find(call->outputs, call->num_outputs, "key_cache");
  const d2k_tensor* value_cache = find(call->outputs, call->num_outputs, "value_cache");
  if (!positions || !table || !slots || !v || !k_scale || !v_scale || !q || !k || !key_cache || !value_cache)
    return failed(call, "missing one of positions, cos_sin_cache, slot_mapping, v, k_scale, v_scale, q, k, key_cache, value_cache");
  if (positions->dtype != D2K_INT64 || positions->rank != 1 || slots->dtype != D2K_INT64 || slots->rank != 1)
    return failed(call, "positions and slot_mapping must be rank-1 int64");
  if (table->dtype != D2K_BFLOAT16 || table->rank != 2) return failed(call, "cos_sin_cache must be rank-2 bf16");
  if (k_scale->dtype != D2K_FLOAT32 || v_scale->dtype != D2K_FLOAT32) return failed(call, "the scales must be fp32");
  for (const d2k_tensor* x : {q, k, v})
    if (x->dtype != D2K_BFLOAT16 || x->rank != 3) return failed(call, "q, k and v must be rank-3 bf16");
  const int64_t tokens = positions->shape[0], head_size = table->shape[1];
  if (q->shape[0] != tokens || k->shape[0] != tokens || v->shape[0] != tokens || slots->shape[0] != tokens ||
      q->shape[2] != head_size || k->shape[2] != head_size || v->shape[2] != head_size ||
      v->shape[1] != k->shape[1] || head_size % 2 != 0)
    return failed(call, "expects q [T, Hq, D], k and v [T, Hkv, D], a table [M, D] (D even), T slots");
  const int64_t element_bytes = key_cache->shape[3] / head_size;
  for (const d2k_tensor* cache : {key_cache, value_cache}) {
    if (cache->dtype != D2K_UINT8 || cache->rank != 4 || cache->shape[2] != k->shape[1] ||
        cache->shape[3] != head_size * element_bytes || (element_bytes != 1 && element_bytes != 2) ||
        cache->strides[3] != 1 || cache->strides[2] != cache->shape[3] ||
        cache->strides[1] != cache->shape[2] * cache->shape[3] || cache->strides[0] != cache->shape[1] * cache->strides[1])
      return failed(call, "the caches must be contiguous uint8 [blocks, block_size, Hkv, D * E], E 1 or 2");
  }
  Args a;
  a.positions = static_cast<const int64_t*>(positions->data);
  a.slots = static_cast<const int64_t*>(slots->data);
  a.q = static_cast<__nv_bfloat16*>(q->data);
  a.k = static_cast<__nv_bfloat16*>(k->data);
  a.v = static_cast<const __nv_bfloat16*>(v->data);
  a.table = static_cast<const __nv_bfloat16*>(table->data);
  a.key_cache = static_cast<uint8_t*>(key_cache->data);
  a.value_cache = static_cast<uint8_t*>(value_cache->data);
  a.k_scale = static_cast<const float*>(k_scale->data);
  a.v_scale = static_cast<const float*>(v_scale->data);
  a.pos_stride = positions->strides[0];
  a.slot_stride = slots->strides[0];
  a.q_token = q->strides[0], a.q_head = q->strides[1], a.q_elem = q->strides[2];
  a.k_token = k->strides[0], a.k_head = k->strides[1], a.k_elem = k->strides[2];
  a.v_token = v->strides[0], a.v_head = v->strides[1], a.v_elem = v->strides[2];
  a.table_row = table->strides[0], a.table_elem = table->strides[1];
  a.tokens = tokens;
  a.q_heads = static_cast<int32_t>(q->shape[1]);
  a.kv_heads = static_cast<int32_t>(k->shape[1]);
  a.half = static_cast<int32_t>(head_size / 2);
  if (tokens == 0 || a.q_heads + a.kv_heads == 0) return 0;
  const auto stream = static_cast<cudaStream_t>(call->stream);
  const bool fp8 = element_bytes == 1;
  if (vector_path(a)) {
    fp8 ? launch<true>(a, stream) : launch<false>(a, stream);
  } else {
    const int64_t pairs = tokens * (a.q_heads + 2 * a.kv_heads) * a.half;
    const auto blocks = static_cast<unsigned>(std::min<int64_t>((pairs + kThreads - 1) / kThreads, 132 * 16));
    fp8 ? rope_cache_strided<true><<<blocks, kThreads, 0, stream>>>(a)
        : rope_cache_strided<false><<<blocks, kThreads, 0, stream>>>(a);
  }
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return failed(call, cudaGetErrorString(error));
  return 0;
}
