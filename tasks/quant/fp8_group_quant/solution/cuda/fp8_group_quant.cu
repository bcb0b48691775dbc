// quant/fp8_group_quant, expert CUDA solution for the H200 (sm_90a).
//
// One pass over x: 8 lanes own one 128-element group (two 16-byte loads of 8 bf16 each), find its
// amax with three shuffles, and store 16 fp8 bytes each (one 16-byte store) plus one scale.
//
// At 3 bytes per element the H200 streams about 5.5 elements per SM per clock, which leaves roughly
// 23 instructions per element at full issue rate. A first version (16 lanes per group, integer
// divisions, a Newton-corrected quotient) spent 20 and ran at 82 % of a same-size device copy; this
// one spends about 10 (no integer division, three operations per element for an exactly rounded
// quotient) and runs at 97 to 99 % of it when the inputs rotate through more memory than L2 holds.
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr int kGroup = 128;
constexpr int kLanesPerGroup = 8;  // 8 lanes x 16 bf16 = one group; a warp holds four groups
constexpr int kThreads = 256;
constexpr int kGroupsPerBlock = kThreads / kLanesPerGroup;
constexpr float kFp8Max = 448.0f;

// n / d for n < 2^31 by a multiply-high and a shift (Granlund and Montgomery), d fixed per launch.
struct FastDiv {
  uint32_t d, magic, shift;
  static FastDiv make(uint32_t d) {
    uint32_t shift = 0;
    while ((uint64_t{1} << shift) < d) ++shift;
    const uint64_t magic = ((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1;
    return {d, static_cast<uint32_t>(magic), shift};
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const { return (__umulhi(n, magic) + n) >> shift; }
};

struct Params {
  const uint16_t* x;
  int64_t x_row_stride;  // elements; rows are 16-byte aligned, columns contiguous
  uint8_t* q;            // row-major [T, K]: group g starts at byte g * 128
  float* scales;
  int64_t scale_stride_t, scale_stride_g;  // row-major (G, 1) or column-major (1, align(T, 4))
  uint32_t num_groups;
  FastDiv groups_per_row;
  // Column-major scales: the grid walks the groups column by column (group index g = col * T + row), so
  // that a block's 32 scales are 32 consecutive tokens of one column, one 128-byte line, where walking
  // row by row scatters 4-byte stores align(T, 4) apart (2 to 8 % slower at T16384-K2048).
  bool by_column;
  FastDiv tokens;
  float eps;
};

// The (row, column) of the g-th group in the grid's walking order.
__device__ __forceinline__ void group_position(const Params& p, uint32_t g, uint32_t& row, uint32_t& col) {
  if (p.by_column) {
    col = p.tokens.div(g);
    row = g - col * p.tokens.d;
  } else {
    row = p.groups_per_row.div(g);
    col = g - row * p.groups_per_row.d;
  }
}

// Read-only path, allowed to allocate in L1: a lane's two 16-byte loads share 32-byte sectors, and the
// second finds them in L1. (With L1::no_allocate the kernel ran 3 to 8 % slower on the H200.)
__device__ __forceinline__ uint4 load_readonly(const void* ptr) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr));
  return v;
}

// q is written once and read only by the next kernel: evict-first.
__device__ __forceinline__ void store_streaming(void* ptr, uint4 v) {
  asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(ptr), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}

__device__ __forceinline__ float reciprocal_approx(float b) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(b));
  return r;
}

// Rounds to the nearest multiple of 32 ulps. An fp8 e4m3 rounding midpoint has at most 5
// significant bits, so it is such a multiple: a quotient within 16 ulps of a midpoint lands exactly
// on it, and any other quotient moves by less than 2e-6 (relative), far less than its distance to
// the nearest midpoint (see quantize_group).
__device__ __forceinline__ float snap_to_midpoints(float v) {
  return __uint_as_float((__float_as_uint(v) + 16u) & ~31u);
}

__device__ __forceinline__ void unpack_bf16x8(const uint4& raw, float* v) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = __uint_as_float(w[i] << 16);  // the lower half is the element at the lower address
    v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

__device__ __forceinline__ uint32_t pack_e4m3x4(const float* v) {
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(v[0], v[1]), __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(v[2], v[3]), __NV_SATFINITE, __NV_E4M3);
  return lo | (hi << 16);
}

// Quantizes one group from the 16 elements this lane holds: lane l of a group holds elements
// [16 l, 16 l + 16), loaded as two 16-byte halves and stored as one 16-byte run of fp8. Every lane of
// the warp calls this (the shuffles need all of them); `valid` says whether this lane's group exists.
template <bool kUe8m0>
__device__ __forceinline__ void quantize_group(const Params& p, const uint4 (&raw)[2], uint32_t row,
                                               uint32_t col, int lane, bool valid) {
  float v[16];
  unpack_bf16x8(raw[0], v);
  unpack_bf16x8(raw[1], v + 8);
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < 16; ++j) amax = fmaxf(amax, fabsf(v[j]));
#pragma unroll
  for (int offset = kLanesPerGroup / 2; offset > 0; offset /= 2) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  }
  amax = fmaxf(amax, p.eps);

  // scale = amax / 448 correctly rounded: the product with the rounded reciprocal and one fma
  // correction (checked on the host for every bf16 amax and for eps).
  const float s0 = amax * (1.0f / kFp8Max);
  float scale = fmaf(fmaf(-s0, kFp8Max, amax), 1.0f / kFp8Max, s0);
  if constexpr (kUe8m0) {
    // 2^ceil(log2(amax / 448)) from the bits: round the exponent up unless the mantissa is zero,
    // which needs the correctly rounded quotient above. Dividing by a power of two is exact, so the
    // multiplier below is exactly 1 / scale.
    uint32_t bits = __float_as_uint(scale);
    if (bits & 0x007fffffu) bits = (bits + 0x00800000u) & 0xff800000u;
    scale = __uint_as_float(bits);
    const float inverse = __uint_as_float((254u - (bits >> 23)) << 23);
#pragma unroll
    for (int j = 0; j < 16; ++j) v[j] *= inverse;
  } else {
    // The fp8 value is decided by where x * 448 / amax falls among the e4m3 rounding midpoints. For
    // bf16 x and amax that ratio is either exactly a midpoint or at least 1.3e-4 (relative) away
    // from every one. x * (448 / amax) with an approximate reciprocal is within a few ulps of it,
    // and the snap to multiples of 32 ulps restores exact midpoints, so q rounds exactly as x / scale
    // does in exact arithmetic (checked on the host for every pair of bf16 mantissas, exponent gap
    // and sign, with the reciprocal off by up to 2 ulps). Groups above 2^100 are brought down by
    // 2^-64 first so that the reciprocal stays a normal number.
    const bool huge = amax > 0x1p100f;
    const float multiplier = kFp8Max * reciprocal_approx(huge ? amax * 0x1p-64f : amax);
    if (huge) {
#pragma unroll
      for (int j = 0; j < 16; ++j) v[j] *= 0x1p-64f;
    }
#pragma unroll
    for (int j = 0; j < 16; ++j) v[j] = snap_to_midpoints(v[j] * multiplier);
  }

  if (valid) {
    const uint4 packed =
        make_uint4(pack_e4m3x4(v), pack_e4m3x4(v + 4), pack_e4m3x4(v + 8), pack_e4m3x4(v + 12));
    const uint64_t group = uint64_t{row} * p.groups_per_row.d + col;  // q is row-major
    store_streaming(p.q + group * kGroup + lane * 16, packed);
    if (lane == 0) p.scales[row * p.scale_stride_t + col * p.scale_stride_g] = scale;
  }
}

// One group per 8 lanes, one CTA per 32 groups. Each lane's two loads are issued back to back before
// any arithmetic, and 28 registers let 2048 threads reside per SM, which keeps about 64 KB of loads
// in flight per SM: more than HBM's bandwidth times its latency. (A persistent grid that prefetches
// the next group, and more groups per thread, measured no faster on the H200.)
template <bool kUe8m0>
__global__ void __launch_bounds__(kThreads) quantize_groups(Params p) {
  const int lane = threadIdx.x % kLanesPerGroup;
  const uint32_t g = blockIdx.x * kGroupsPerBlock + threadIdx.x / kLanesPerGroup;
  uint4 raw[2] = {make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};  // lanes past the end reduce zeros
  const bool valid = g < p.num_groups;
  uint32_t row = 0, col = 0;
  if (valid) {
    group_position(p, g, row, col);
    const uint16_t* src = p.x + row * p.x_row_stride + int64_t{col} * kGroup + lane * 16;
    raw[0] = load_readonly(src);
    raw[1] = load_readonly(src + 8);
  }
  quantize_group<kUe8m0>(p, raw, row, col, lane, valid);
}

const d2k_tensor* find_tensor(const d2k_tensor* list, int32_t n, const char* name) {
  for (int32_t i = 0; i < n; ++i)
    if (std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

const d2k_scalar* find_scalar(const d2k_call* call, const char* name) {
  for (int32_t i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, name) == 0) return &call->scalars[i];
  return nullptr;
}

template <typename... Args>
int fail(const d2k_call* call, const char* format, Args... args) {
  const int n = std::snprintf(call->error, D2K_ERROR_CAPACITY, "fp8_group_quant (cuda): ");
  std::snprintf(call->error + n, D2K_ERROR_CAPACITY - n, format, args...);
  return 1;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* x = find_tensor(call->inputs, call->num_inputs, "x");
  const d2k_tensor* q = find_tensor(call->outputs, call->num_outputs, "q");
  const d2k_tensor* s = find_tensor(call->outputs, call->num_outputs, "scales");
  const d2k_scalar* group_size = find_scalar(call, "group_size");
  const d2k_scalar* ue8m0 = find_scalar(call, "ue8m0");
  const d2k_scalar* eps = find_scalar(call, "eps");
  if (!x || !q || !s) return fail(call, "expected input x and outputs q, scales");
  if (!group_size || !ue8m0 || !eps) return fail(call, "expected scalars group_size, ue8m0, eps");
  if (group_size->i != kGroup) {
    return fail(call, "scalar group_size = %lld is not supported (only 128)", (long long)group_size->i);
  }
  if (x->dtype != D2K_BFLOAT16 || q->dtype != D2K_FLOAT8_E4M3 || s->dtype != D2K_FLOAT32) {
    return fail(call, "expected x bf16, q f8e4m3, scales f32 (got dtypes %d, %d, %d)", x->dtype,
                q->dtype, s->dtype);
  }
  if (x->rank != 2 || q->rank != 2 || s->rank != 2) return fail(call, "expected x, q, scales of rank 2");
  const int64_t T = x->shape[0], K = x->shape[1];
  if (K % kGroup != 0) return fail(call, "K = %lld is not a multiple of 128", (long long)K);
  const int64_t G = K / kGroup;
  if (q->shape[0] != T || q->shape[1] != K || s->shape[0] != T || s->shape[1] != G) {
    return fail(call, "q must be [T, K] = [%lld, %lld] and scales [T, K / 128]", (long long)T,
                (long long)K);
  }
  if (T == 0 || K == 0) return 0;
  // 16-byte loads of x need contiguous, 16-byte aligned rows; q is written as one flat run of groups.
  if (x->strides[1] != 1 || x->strides[0] % 8 != 0 || reinterpret_cast<uintptr_t>(x->data) % 16 != 0) {
    return fail(call, "x needs unit column stride, a row stride that is a multiple of 8 and 16-byte "
                "alignment (strides %lld, %lld)", (long long)x->strides[0], (long long)x->strides[1]);
  }
  const bool q_row_major = q->strides[1] == 1 && (T == 1 || q->strides[0] == K);
  if (!q_row_major || reinterpret_cast<uintptr_t>(q->data) % 16 != 0) {
    return fail(call, "q must be row-major contiguous and 16-byte aligned (strides %lld, %lld)",
                (long long)q->strides[0], (long long)q->strides[1]);
  }
  const int64_t num_groups = T * G;
  if (num_groups >= (int64_t{1} << 31)) {
    return fail(call, "T * K / 128 = %lld groups is more than this kernel indexes",
                (long long)num_groups);
  }

  Params p;
  p.x = static_cast<const uint16_t*>(x->data);
  p.x_row_stride = x->strides[0];
  p.q = static_cast<uint8_t*>(q->data);
  p.scales = static_cast<float*>(s->data);
  p.scale_stride_t = s->strides[0];
  p.scale_stride_g = s->strides[1];
  p.num_groups = static_cast<uint32_t>(num_groups);
  p.groups_per_row = FastDiv::make(static_cast<uint32_t>(G));
  p.by_column = s->strides[0] == 1 && T > 1;
  p.tokens = FastDiv::make(static_cast<uint32_t>(T));
  p.eps = static_cast<float>(eps->f);

  const unsigned blocks = static_cast<unsigned>((num_groups + kGroupsPerBlock - 1) / kGroupsPerBlock);
  auto stream = static_cast<cudaStream_t>(call->stream);
  if (ue8m0->i != 0) {
    quantize_groups<true><<<blocks, kThreads, 0, stream>>>(p);
  } else {
    quantize_groups<false><<<blocks, kThreads, 0, stream>>>(p);
  }
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return fail(call, "kernel launch failed: %s", cudaGetErrorString(status));
  return 0;
}
