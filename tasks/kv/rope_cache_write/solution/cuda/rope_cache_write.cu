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
constexpr int kItemsPerThread = 2;  // items whose loads are in flight before the first computation
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

// Two bf16 values -> two fp8 e4m3fn codes (first in the low byte): value / scale correctly rounded in fp32,
// then the saturating round-to-nearest-even conversion (vLLM's scaled_convert).
__device__ __forceinline__ uint32_t fp8_pair(uint32_t bits, float scale) {
  const float2 x = widen(bits);
  const float2 scaled = make_float2(__fdiv_rn(x.x, scale), __fdiv_rn(x.y, scale));
  return __nv_cvt_float2_to_fp8x2(scaled, __NV_SATFINITE, __NV_E4M3);
}

union Vec {
  uint4 word;
  uint32_t pair[4];
};

// Stores a head's two 8-element vectors (at element offsets `offset` and `half + offset`) into a cache row:
// as they are, or as fp8 codes (8 bytes each).
template <bool kFp8>
__device__ __forceinline__ void store_cache(uint8_t* head_row, int32_t half, uint32_t offset, const Vec& x,
                                            const Vec& y, float scale) {
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

// Contiguous heads, every stride and pointer a multiple of 8 elements. Items of tokens [first_token,
// first_token + tokens) in a 32-bit flat index: per token, the heads of q, then k, then v, each split into
// half / 8 vectors.
template <bool kFp8>
__global__ void __launch_bounds__(kThreads) rope_cache_vec(Args a, int64_t first_token, uint32_t vecs_per_head,
                                                           uint32_t items_per_token, uint32_t items) {
  constexpr int64_t kBytes = kFp8 ? 1 : 2;
  const uint32_t base = blockIdx.x * (kThreads * kItemsPerThread) + threadIdx.x;
  const int32_t rotated_heads = a.q_heads + a.kv_heads;
  Vec x[kItemsPerThread], y[kItemsPerThread], c[kItemsPerThread], s[kItemsPerThread];
  __nv_bfloat16* in_place[kItemsPerThread];  // q or k head, or null for a v item
  int64_t position[kItemsPerThread], slot[kItemsPerThread];
  uint32_t offset[kItemsPerThread];
  int32_t head[kItemsPerThread];  // in [0, Hq + 2 Hkv); -1: no item

  // q, k and v vectors, positions and slots: none depends on another load.
#pragma unroll
  for (int i = 0; i < kItemsPerThread; ++i) {
    const uint32_t item = base + i * kThreads;
    head[i] = -1;
    if (item >= items) continue;
    const uint32_t token = item / items_per_token;
    const uint32_t rest = item - token * items_per_token;
    const uint32_t h = rest / vecs_per_head;
    offset[i] = (rest - h * vecs_per_head) * kVec;
    head[i] = static_cast<int32_t>(h);
    const int64_t t = first_token + token;
    const __nv_bfloat16* from;
    if (head[i] < a.q_heads) {
      in_place[i] = a.q + t * a.q_token + head[i] * a.q_head;
      from = in_place[i];
    } else if (head[i] < rotated_heads) {
      in_place[i] = a.k + t * a.k_token + (head[i] - a.q_heads) * a.k_head;
      from = in_place[i];
    } else {
      in_place[i] = nullptr;
      from = a.v + t * a.v_token + (head[i] - rotated_heads) * a.v_head;
    }
    x[i].word = *reinterpret_cast<const uint4*>(from + offset[i]);
    y[i].word = *reinterpret_cast<const uint4*>(from + a.half + offset[i]);
    if (in_place[i]) position[i] = __ldg(a.positions + t * a.pos_stride);
    slot[i] = head[i] >= a.q_heads ? __ldg(a.slots + t * a.slot_stride) : -1;
  }
  // The table row of each rotated item's token: cos at [offset, offset + 8), sin half a row later.
#pragma unroll
  for (int i = 0; i < kItemsPerThread; ++i) {
    if (head[i] < 0 || !in_place[i]) continue;
    const __nv_bfloat16* row = a.table + position[i] * a.table_row + offset[i];
    c[i].word = __ldg(reinterpret_cast<const uint4*>(row));
    s[i].word = __ldg(reinterpret_cast<const uint4*>(row + a.half));
  }
  float k_scale = 1.0f, v_scale = 1.0f;
  if constexpr (kFp8) {
    k_scale = __ldg(a.k_scale);
    v_scale = __ldg(a.v_scale);
  }
  const int64_t row_elements = static_cast<int64_t>(a.kv_heads) * 2 * a.half;  // Hkv * D
#pragma unroll
  for (int i = 0; i < kItemsPerThread; ++i) {
    if (head[i] < 0) continue;
    if (in_place[i]) {
#pragma unroll
      for (int p = 0; p < 4; ++p) rotate_pairs(x[i].pair[p], y[i].pair[p], c[i].pair[p], s[i].pair[p]);
      *reinterpret_cast<uint4*>(in_place[i] + offset[i]) = x[i].word;
      *reinterpret_cast<uint4*>(in_place[i] + a.half + offset[i]) = y[i].word;
    }
    if (slot[i] < 0) continue;  // a q item, or a padding token's k or v: nothing cached
    const bool is_k = head[i] < rotated_heads;
    const int32_t kv_head = head[i] - (is_k ? a.q_heads : rotated_heads);
    uint8_t* head_row = (is_k ? a.key_cache : a.value_cache) +
                        (slot[i] * row_elements + static_cast<int64_t>(kv_head) * 2 * a.half) * kBytes;
    store_cache<kFp8>(head_row, a.half, offset[i], x[i], y[i], is_k ? k_scale : v_scale);
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

template <bool kFp8>
void launch(const Args& a, cudaStream_t stream) {
  const auto vecs_per_head = static_cast<uint32_t>(a.half / kVec);
  const auto items_per_token = static_cast<uint32_t>((a.q_heads + 2 * a.kv_heads) * vecs_per_head);
  // Slices of tokens whose item count stays below 2^31: 32-bit index arithmetic in the kernel.
  const int64_t tokens_per_slice = std::max<int64_t>(1, (int64_t{1} << 31) / items_per_token - 1);
  for (int64_t first = 0; first < a.tokens; first += tokens_per_slice) {
    const int64_t tokens = std::min(tokens_per_slice, a.tokens - first);
    const auto items = static_cast<uint32_t>(tokens * items_per_token);
    const uint32_t blocks = (items + kThreads * kItemsPerThread - 1) / (kThreads * kItemsPerThread);
    rope_cache_vec<kFp8><<<blocks, kThreads, 0, stream>>>(a, first, vecs_per_head, items_per_token, items);
  }
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
