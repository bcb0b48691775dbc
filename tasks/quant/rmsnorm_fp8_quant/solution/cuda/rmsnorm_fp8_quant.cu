// quant/rmsnorm_fp8_quant, expert CUDA solution for the H200 (sm_90a).
//
// One CTA per row, the row held in registers from its one read to its one write: each thread loads its
// 16-byte vectors of x (and of the weight, which every row shares and L1/L2 keep), sums their squares,
// and after a first block reduction forms y = bf16(bf16(x * inv) * w) in place with packed bf16
// arithmetic; a second block reduction gives the row's amax, and the same registers are quantized and
// stored as 8-byte runs of fp8. DRAM sees the floor's bytes: x once, q once, a scale per row.
//
// At 3 bytes per element the H200 moves about 5.5 elements per SM per clock, so the kernel has roughly
// 20 instructions per element before it becomes issue bound; the element path here spends about 11
// (unpack, square, scale, one conversion and one bf16 multiply per pair, abs-max per pair, the quotient,
// its midpoint snap, one conversion per pair) and the two reductions add about 3 per element at 16
// elements per thread.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr int kVecElems = 8;          // bf16 per 16-byte vector
constexpr int kMaxThreads = 1024;
constexpr int kStridedThreads = 256;
constexpr float kFp8Max = 448.0f;
constexpr float kAmaxFloor = 0x1p-9f;  // amax / 448 is clamped at 1 / (448 * 512): amax at 2^-9

struct Params {
  const __nv_bfloat16* x;
  const __nv_bfloat16* w;
  uint8_t* q;
  float* scales;
  int64_t x_row, x_col;  // strides in elements (the vector path needs x_col == 1)
  int64_t w_col;
  int64_t q_row, q_col;
  int64_t s_row;
  int hidden;
  int vecs;  // hidden / 8, vector path only
  float inv_hidden;  // 1 / H: the mean of the squares as a product (within an ulp of vLLM's quotient)
  float eps;
};

// Read-only path, allowed to allocate in L1: the weight is read by every row of an SM.
__device__ __forceinline__ uint4 load_readonly(const void* ptr) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// One barrier per reduction: every warp reduces the per-warp partials itself, so nothing is broadcast
// after it. The two reductions of a row use different slots, so the second cannot overwrite partials a
// slow warp is still reading from the first. blockDim.x is a multiple of 32.
__device__ __forceinline__ float block_sum(float v, float* partial) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  return warp_sum(lane < static_cast<int>(blockDim.x >> 5) ? partial[lane] : 0.0f);
}

__device__ __forceinline__ float block_max(float v, float* partial) {
  v = warp_max(v);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  return warp_max(lane < static_cast<int>(blockDim.x >> 5) ? partial[lane] : 0.0f);
}

// Rounds to the nearest multiple of 32 ulps. An fp8 e4m3 rounding midpoint has at most 5 significant
// bits, so it is such a multiple: a quotient within 16 ulps of a midpoint lands exactly on it, and any
// other one moves by less than 2e-6 (relative), far less than its distance to the nearest midpoint.
__device__ __forceinline__ float snap_to_midpoints(float v) {
  return __uint_as_float((__float_as_uint(v) + 16u) & ~31u);
}

__device__ __forceinline__ float reciprocal_approx(float b) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(b));
  return r;
}

// The multiplier 448 / amax (amax already floored at 2^-9), within two ulps. The approximate reciprocal
// flushes to zero above 2^126, where only the correctly rounded division (always a normal float here)
// will do; no realistic row gets there, so the branch is uniform and never taken.
__device__ __forceinline__ float multiplier_for(float floored) {
  return floored < 0x1p126f ? kFp8Max * reciprocal_approx(floored) : kFp8Max / floored;
}

// The quotient y * 448 / amax for the fp8 conversion. y and amax are bf16 values, so the exact
// quotient is either an fp8 rounding midpoint or at least 1.2e-4 (relative) away from every one
// (448 y / amax = 7 a / b * 2^k for 8-bit integers a, b; a midpoint is an odd integer below 32 times a
// power of two). y * multiplier is within a few ulps of the exact quotient and the snap restores exact
// midpoints: the conversion then rounds as the exact quotient does.
__device__ __forceinline__ float quotient(float y, float multiplier) { return snap_to_midpoints(y * multiplier); }

// Saturating round-to-nearest-even conversion of two values, the first at the lower address.
__device__ __forceinline__ uint32_t to_e4m3x2(float a, float b) {
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}

// bf16 pairs are kept as raw 32-bit words (the element at the lower address in the low half): unpacking
// is a shift or a mask, and packed bf16 arithmetic works on the words directly.
__device__ __forceinline__ float low_of(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float high_of(uint32_t pair) { return __uint_as_float(pair & 0xffff0000u); }

// Two floats rounded to nearest even into one bf16 pair.
__device__ __forceinline__ uint32_t to_bf16x2(float low, float high) {
  uint32_t pair;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(pair) : "f"(high), "f"(low));
  return pair;
}

// The product of two bf16 pairs, each rounded once to bf16 (exact product, one rounding).
__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t product;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(product) : "r"(a), "r"(b));
  return product;
}

// Element-wise max of two bf16 pairs of magnitudes (both non-negative).
__device__ __forceinline__ uint32_t max_bf16x2(uint32_t a, uint32_t b) {
  uint32_t m;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(m) : "r"(a), "r"(b));
  return m;
}

// The vector path: thread i owns vectors i, i + blockDim.x, ... of the row (kVecs of them), so each
// warp's loads and stores are contiguous. Threads past the row's end hold zeros, which add nothing to
// either reduction.
template <int kVecs>
__global__ void __launch_bounds__(kMaxThreads) rmsnorm_quant_vec(Params p) {
  __shared__ float partial_sum[32], partial_max[32];
  const int64_t row = blockIdx.x;
  // This thread's first vector of the row, of the weight and of q; vector k is k * blockDim.x further.
  const uint4* x = reinterpret_cast<const uint4*>(p.x + row * p.x_row) + threadIdx.x;
  const uint4* w = reinterpret_cast<const uint4*>(p.w) + threadIdx.x;
  uint2* q = reinterpret_cast<uint2*>(p.q + row * p.q_row) + threadIdx.x;
  const int stride = blockDim.x;
  const int own = p.vecs - static_cast<int>(threadIdx.x);  // vector k exists when k * stride < own

  uint4 xv[kVecs], wv[kVecs];
  // Every load of the row is issued before the first is used.
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    xv[k] = make_uint4(0, 0, 0, 0);
    wv[k] = make_uint4(0, 0, 0, 0);
    if (k * stride < own) {
      xv[k] = load_readonly(x + k * stride);
      wv[k] = load_readonly(w + k * stride);
    }
  }

  float sum_sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const uint32_t words[4] = {xv[k].x, xv[k].y, xv[k].z, xv[k].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float lo = low_of(words[j]), hi = high_of(words[j]);
      sum_sq = fmaf(lo, lo, sum_sq);
      sum_sq = fmaf(hi, hi, sum_sq);
    }
  }
  sum_sq = block_sum(sum_sq, partial_sum);
  const float inv = rsqrtf(sum_sq * p.inv_hidden + p.eps);

  // y = bf16(bf16(x * inv) * w), in place of x: one conversion of a pair of products to bf16, then one
  // bf16x2 multiply (the product of two bf16 values is exact in fp32, so its single rounding is the
  // specification's fp32 product rounded to bf16). The amax of |y| is exact in bf16.
  uint32_t amax2 = 0;
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    uint32_t words[4] = {xv[k].x, xv[k].y, xv[k].z, xv[k].w};
    const uint32_t weights[4] = {wv[k].x, wv[k].y, wv[k].z, wv[k].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t normed = to_bf16x2(low_of(words[j]) * inv, high_of(words[j]) * inv);
      words[j] = mul_bf16x2(normed, weights[j]);
      amax2 = max_bf16x2(amax2, words[j] & 0x7fff7fffu);
    }
    xv[k] = make_uint4(words[0], words[1], words[2], words[3]);
  }
  const float amax = block_max(fmaxf(low_of(amax2), high_of(amax2)), partial_max);

  const float floored = fmaxf(amax, kAmaxFloor);
  if (threadIdx.x == 0) p.scales[row * p.s_row] = floored / kFp8Max;  // correctly rounded
  const float multiplier = multiplier_for(floored);

#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    if (k * stride < own) {
      const uint32_t words[4] = {xv[k].x, xv[k].y, xv[k].z, xv[k].w};
      uint32_t packed[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        packed[j] = to_e4m3x2(quotient(low_of(words[j]), multiplier), quotient(high_of(words[j]), multiplier));
      }
      q[k * stride] = make_uint2(packed[0] | (packed[1] << 16), packed[2] | (packed[3] << 16));
    }
  }
}

// Any layout (a last dimension that is not contiguous, a width that is not a multiple of 8, misaligned
// rows, rows wider than the vector path holds): one CTA per row. The first kStridedHeld elements of each
// thread are loaded once, x and w together, and kept in registers, so a row of up to kStridedHeld * 256
// elements costs one round trip to memory before the first reduction and none after (v1 read w only
// after the sum of squares: a second round trip, 7.1 us for 5 rows of 1001); elements past them are
// read again in each sweep (L1 or L2) and y recomputed.
constexpr int kStridedHeld = 4;

__global__ void __launch_bounds__(kStridedThreads) rmsnorm_quant_strided(Params p) {
  __shared__ float partial_sum[32], partial_max[32];
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* x = p.x + row * p.x_row;
  const int held_end = kStridedHeld * kStridedThreads;

  float xv[kStridedHeld], wv[kStridedHeld];
#pragma unroll
  for (int j = 0; j < kStridedHeld; ++j) {
    const int i = threadIdx.x + j * kStridedThreads;
    xv[j] = i < p.hidden ? __bfloat162float(x[i * p.x_col]) : 0.0f;
    wv[j] = i < p.hidden ? __bfloat162float(p.w[i * p.w_col]) : 0.0f;
  }
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kStridedHeld; ++j) sum_sq = fmaf(xv[j], xv[j], sum_sq);
  for (int i = held_end + threadIdx.x; i < p.hidden; i += kStridedThreads) {
    const float v = __bfloat162float(x[i * p.x_col]);
    sum_sq = fmaf(v, v, sum_sq);
  }
  sum_sq = block_sum(sum_sq, partial_sum);
  const float inv = rsqrtf(sum_sq * p.inv_hidden + p.eps);

  auto y_of = [&](float xval, float wval) {
    const float normed = __bfloat162float(__float2bfloat16_rn(xval * inv));
    return __bfloat162float(__float2bfloat16_rn(normed * wval));
  };
  auto y_at = [&](int i) {
    return y_of(__bfloat162float(x[i * p.x_col]), __bfloat162float(p.w[i * p.w_col]));
  };
  float yv[kStridedHeld];
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < kStridedHeld; ++j) {
    yv[j] = y_of(xv[j], wv[j]);  // 0 past the row's end
    amax = fmaxf(amax, fabsf(yv[j]));
  }
  for (int i = held_end + threadIdx.x; i < p.hidden; i += kStridedThreads) amax = fmaxf(amax, fabsf(y_at(i)));
  amax = block_max(amax, partial_max);

  const float floored = fmaxf(amax, kAmaxFloor);
  if (threadIdx.x == 0) p.scales[row * p.s_row] = floored / kFp8Max;
  const float multiplier = multiplier_for(floored);
  uint8_t* q = p.q + row * p.q_row;
  auto store = [&](int i, float y) {
    q[i * p.q_col] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(quotient(y, multiplier), __NV_SATFINITE, __NV_E4M3));
  };
#pragma unroll
  for (int j = 0; j < kStridedHeld; ++j) {
    const int i = threadIdx.x + j * kStridedThreads;
    if (i < p.hidden) store(i, yv[j]);
  }
  for (int i = held_end + threadIdx.x; i < p.hidden; i += kStridedThreads) store(i, y_at(i));
}

const d2k_tensor* find(const d2k_tensor* list, int32_t n, const char* name) {
  for (int32_t i = 0; i < n; ++i)
    if (std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

template <typename... Args>
int fail(const d2k_call* call, const char* format, Args... args) {
  const int n = std::snprintf(call->error, D2K_ERROR_CAPACITY, "rmsnorm_fp8_quant (cuda): ");
  std::snprintf(call->error + n, D2K_ERROR_CAPACITY - n, format, args...);
  return 1;
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <int kVecs>
void launch_vec(const Params& p, unsigned rows, cudaStream_t stream) {
  const int threads = ((p.vecs + kVecs - 1) / kVecs + 31) / 32 * 32;
  rmsnorm_quant_vec<kVecs><<<rows, threads, 0, stream>>>(p);
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* x = find(call->inputs, call->num_inputs, "x");
  const d2k_tensor* w = find(call->inputs, call->num_inputs, "weight");
  const d2k_tensor* q = find(call->outputs, call->num_outputs, "q");
  const d2k_tensor* s = find(call->outputs, call->num_outputs, "scales");
  if (!x || !w || !q || !s) return fail(call, "expected inputs x, weight and outputs q, scales");
  if (call->num_scalars < 1 || std::strcmp(call->scalars[0].name, "eps") != 0) return fail(call, "expected scalar eps");
  if (x->dtype != D2K_BFLOAT16 || w->dtype != D2K_BFLOAT16 || q->dtype != D2K_FLOAT8_E4M3 || s->dtype != D2K_FLOAT32) {
    return fail(call, "expected x, weight bf16, q f8e4m3, scales f32 (got %d, %d, %d, %d)", x->dtype, w->dtype,
                q->dtype, s->dtype);
  }
  if (x->rank != 2 || w->rank != 1 || q->rank != 2 || s->rank != 2) {
    return fail(call, "expected x, q, scales of rank 2 and weight of rank 1");
  }
  const int64_t T = x->shape[0], H = x->shape[1];
  if (w->shape[0] != H || q->shape[0] != T || q->shape[1] != H || s->shape[0] != T || s->shape[1] != 1) {
    return fail(call, "expected weight [H], q [T, H] and scales [T, 1] for x [%lld, %lld]", (long long)T, (long long)H);
  }
  if (T == 0) return 0;
  if (T > INT32_MAX || H > INT32_MAX) return fail(call, "more than 2^31 - 1 rows or columns");

  Params p;
  p.x = static_cast<const __nv_bfloat16*>(x->data);
  p.w = static_cast<const __nv_bfloat16*>(w->data);
  p.q = static_cast<uint8_t*>(q->data);
  p.scales = static_cast<float*>(s->data);
  p.x_row = x->strides[0];
  p.x_col = x->strides[1];
  p.w_col = w->strides[0];
  p.q_row = q->strides[0];
  p.q_col = q->strides[1];
  p.s_row = s->strides[0];
  p.hidden = static_cast<int>(H);
  p.vecs = static_cast<int>(H / kVecElems);
  p.inv_hidden = static_cast<float>(1.0 / static_cast<double>(H));
  p.eps = static_cast<float>(call->scalars[0].f);

  // The vector path: whole 16-byte vectors of x and the weight, 8-byte runs of q, on aligned rows.
  const bool vector_layout = H % kVecElems == 0 && p.x_col == 1 && p.w_col == 1 && p.q_col == 1 &&
                             (T == 1 || (p.x_row % kVecElems == 0 && p.q_row % kVecElems == 0)) &&
                             aligned(p.x, 16) && aligned(p.w, 16) && aligned(p.q, 8);
  auto stream = static_cast<cudaStream_t>(call->stream);
  const auto rows = static_cast<unsigned>(T);
  // Few rows (under two per SM): one vector per thread, the row spread over the most threads, for
  // latency. Many rows: four vectors (32 elements) per thread, so the two reductions, the scale and
  // the addressing are spread over more elements (the kernel must stay far from issue bound: about 20
  // instructions per element at the copy rate), and 8 KB rows of Llama-3-8B still give 8 resident
  // rows (64 KB of loads in flight) per SM.
  const bool few_rows = T < 264;
  if (vector_layout && few_rows && p.vecs <= kMaxThreads) {
    launch_vec<1>(p, rows, stream);
  } else if (vector_layout && p.vecs <= 4 * kMaxThreads) {
    launch_vec<4>(p, rows, stream);
  } else {
    rmsnorm_quant_strided<<<rows, kStridedThreads, 0, stream>>>(p);
  }
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return fail(call, "kernel launch failed: %s", cudaGetErrorString(status));
  return 0;
}
