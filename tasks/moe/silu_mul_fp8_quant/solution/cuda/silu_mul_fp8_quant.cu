// moe/silu_mul_fp8_quant, expert CUDA solution for the H200 (sm_90a).
//
// One pass over x: 8 lanes own one 128-column group of the output. Each lane loads its 16 gate values
// and the 16 up values I columns further (four 16-byte loads, all issued before any arithmetic), forms y = bf16(bf16(silu(g)) * u) with packed bf16 arithmetic, finds the group's amax with
// three shuffles, and stores its 16 fp8 results as one 16-byte store; lane 0 stores the scale where the
// scales descriptor says (row-major or DeepGEMM's column-major).
//
// At 5 bytes per output element (4 read, 1 written) the H200 moves about 3.5 elements per SM per clock,
// which leaves some 35 instructions per element at full issue rate; this path spends about 17 (silu is
// five of them, two on the quarter-rate transcendental unit) plus about 2 of per-group overhead.
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr int kGroup = 128;
constexpr int kLanesPerGroup = 8;  // 8 lanes x 16 columns = one group; a warp holds four groups
constexpr int kThreads = 256;
constexpr int kGroupsPerBlock = kThreads / kLanesPerGroup;
constexpr float kFp8Max = 448.0f;

// n / d for n < 2^31 by a multiply-high, an add and a shift, with d fixed per launch: with
// l = ceil(log2 d) and m = floor(2^32 (2^l - d) / d) + 1, n / d = (umulhi(n, m) + n) >> l.
struct Divider {
  uint32_t d, m, l;
  static Divider of(uint32_t d) {
    uint32_t l = 0;
    while ((uint64_t{1} << l) < d) ++l;
    return {d, static_cast<uint32_t>((uint64_t{1} << 32) * ((uint64_t{1} << l) - d) / d + 1), l};
  }
  __device__ __forceinline__ uint32_t divide(uint32_t n) const { return (__umulhi(n, m) + n) >> l; }
};

struct Params {
  const uint16_t* x;  // bf16 bits
  int64_t x_row, x_col;  // strides in elements (the vector path needs x_col == 1)
  uint8_t* q;
  int64_t q_row, q_col;
  float* scales;
  int64_t s_row, s_col;  // row-major (G, 1) or column-major (1, align(T, 4))
  int64_t inter;         // I: the up half starts I columns after the gate half
  uint32_t num_groups;   // T * I / 128
  Divider groups_per_row;
  float eps;
};

__device__ __forceinline__ uint4 load_readonly(const void* ptr) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr));
  return v;
}

// bf16 pairs are kept as raw 32-bit words (the element at the lower address in the low half).
__device__ __forceinline__ float low_of(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float high_of(uint32_t pair) { return __uint_as_float(pair & 0xffff0000u); }

__device__ __forceinline__ uint32_t to_bf16x2(float low, float high) {
  uint32_t pair;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(pair) : "f"(high), "f"(low));
  return pair;
}

// The exact product of two bf16 pairs rounded once to bf16.
__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t product;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(product) : "r"(a), "r"(b));
  return product;
}

__device__ __forceinline__ uint32_t max_bf16x2(uint32_t a, uint32_t b) {
  uint32_t m;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(m) : "r"(a), "r"(b));
  return m;
}

__device__ __forceinline__ float exp2_approx(float v) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}

__device__ __forceinline__ float reciprocal_approx(float v) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}

// silu(g) = g / (1 + e^-g) with the hardware's exponential and reciprocal, a few fp32 ulps from the
// exact value (as SGLang's __expf): the bf16 rounding that follows then differs from the correctly
// rounded one in about one element in ten thousand, far inside the tolerance. Below about -88, e^-g is
// +inf, its reciprocal 0, and silu(g) = g * 0 = -0, the value the exact result rounds to.
__device__ __forceinline__ float silu(float g) {
  return g * reciprocal_approx(1.0f + exp2_approx(g * -1.4426950408889634f));
}

// Rounds to the nearest multiple of 32 ulps. An fp8 e4m3 rounding midpoint has at most 5 significant
// bits, so it is such a multiple: a quotient within 16 ulps of a midpoint lands exactly on it, and any
// other one moves by less than 2e-6 (relative), far less than its distance to the nearest midpoint.
__device__ __forceinline__ float snap_to_midpoints(float v) {
  return __uint_as_float((__float_as_uint(v) + 16u) & ~31u);
}

// The multiplier 448 / amax, within two ulps. The approximate reciprocal flushes to zero above 2^126,
// where only the correctly rounded division (always a normal float here) will do; no realistic group
// gets there, so the branch is uniform in practice and never taken.
__device__ __forceinline__ float multiplier_for(float amax) {
  return amax < 0x1p126f ? kFp8Max * reciprocal_approx(amax) : kFp8Max / amax;
}

__device__ __forceinline__ uint32_t to_e4m3x2(float a, float b) {
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}

// The vector path. Lane l of a group holds output columns [16 l, 16 l + 16) of the group: two 16-byte
// vectors of gates and two of ups. Lanes whose group is past the end load nothing and reduce zeros, but
// still take part in the shuffles.
__global__ void __launch_bounds__(kThreads) silu_mul_quant_vec(Params p) {
  const int lane = threadIdx.x % kLanesPerGroup;
  const uint32_t group = blockIdx.x * kGroupsPerBlock + threadIdx.x / kLanesPerGroup;
  const bool valid = group < p.num_groups;
  uint32_t row = 0, col = 0;
  uint4 gate[2] = {make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
  uint4 up[2] = {make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
  if (valid) {
    row = p.groups_per_row.divide(group);
    col = group - row * p.groups_per_row.d;
    const uint16_t* g = p.x + row * p.x_row + int64_t{col} * kGroup + lane * 16;
    const uint16_t* u = g + p.inter;
    gate[0] = load_readonly(g);
    gate[1] = load_readonly(g + 8);
    up[0] = load_readonly(u);
    up[1] = load_readonly(u + 8);
  }

  // y = bf16(bf16(silu(g)) * u): silu's pair rounded by one conversion, then one bf16x2 multiply (the
  // product of two bf16 values is exact in fp32, so its single rounding is the specification's). The
  // amax of |y| is exact in bf16.
  uint32_t y[8];
  uint32_t amax2 = 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint32_t gw[4] = {gate[h].x, gate[h].y, gate[h].z, gate[h].w};
    const uint32_t uw[4] = {up[h].x, up[h].y, up[h].z, up[h].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t s = to_bf16x2(silu(low_of(gw[j])), silu(high_of(gw[j])));
      y[4 * h + j] = mul_bf16x2(s, uw[j]);
      amax2 = max_bf16x2(amax2, y[4 * h + j] & 0x7fff7fffu);
    }
  }
  float amax = fmaxf(low_of(amax2), high_of(amax2));
#pragma unroll
  for (int offset = kLanesPerGroup / 2; offset > 0; offset /= 2) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  }
  amax = fmaxf(amax, p.eps);

  if (!valid) return;
  if (lane == 0) p.scales[row * p.s_row + col * p.s_col] = amax / kFp8Max;  // correctly rounded
  // y and amax are bf16 values (or amax is eps and every y is 0), so y * 448 / amax is either exactly
  // an fp8 rounding midpoint or at least 1.2e-4 (relative) away from every one: the product with an
  // approximate multiplier, snapped, rounds as the exact quotient does.
  const float multiplier = multiplier_for(amax);
  uint32_t packed[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    packed[j] = to_e4m3x2(snap_to_midpoints(low_of(y[j]) * multiplier), snap_to_midpoints(high_of(y[j]) * multiplier));
  }
  const uint4 out = make_uint4(packed[0] | (packed[1] << 16), packed[2] | (packed[3] << 16),
                               packed[4] | (packed[5] << 16), packed[6] | (packed[7] << 16));
  *reinterpret_cast<uint4*>(p.q + row * p.q_row + int64_t{col} * kGroup + lane * 16) = out;
}

// Any layout the vector path cannot take (a last dimension that is not contiguous, misaligned rows): one
// thread per group, element by element, two sweeps (the second re-reads the group from L1 or L2).
__global__ void __launch_bounds__(kThreads) silu_mul_quant_strided(Params p) {
  const uint32_t group = blockIdx.x * kThreads + threadIdx.x;
  if (group >= p.num_groups) return;
  const uint32_t row = p.groups_per_row.divide(group);
  const uint32_t col = group - row * p.groups_per_row.d;
  const uint16_t* x = p.x + row * p.x_row;
  auto y_at = [&](int j) {
    const int64_t i = int64_t{col} * kGroup + j;
    const float g = __uint_as_float(static_cast<uint32_t>(x[i * p.x_col]) << 16);
    const float u = __uint_as_float(static_cast<uint32_t>(x[(p.inter + i) * p.x_col]) << 16);
    const float s = low_of(to_bf16x2(silu(g), 0.0f));
    return low_of(to_bf16x2(s * u, 0.0f));
  };
  float amax = 0.0f;
  for (int j = 0; j < kGroup; ++j) amax = fmaxf(amax, fabsf(y_at(j)));
  amax = fmaxf(amax, p.eps);
  p.scales[row * p.s_row + col * p.s_col] = amax / kFp8Max;
  const float multiplier = multiplier_for(amax);
  for (int j = 0; j < kGroup; ++j) {
    const float v = snap_to_midpoints(y_at(j) * multiplier);
    p.q[row * p.q_row + (int64_t{col} * kGroup + j) * p.q_col] =
        static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
  }
}

const d2k_tensor* find(const d2k_tensor* list, int32_t n, const char* name) {
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
  const int n = std::snprintf(call->error, D2K_ERROR_CAPACITY, "silu_mul_fp8_quant (cuda): ");
  std::snprintf(call->error + n, D2K_ERROR_CAPACITY - n, format, args...);
  return 1;
}

bool aligned(const void* ptr, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* x = find(call->inputs, call->num_inputs, "x");
  const d2k_tensor* q = find(call->outputs, call->num_outputs, "q");
  const d2k_tensor* s = find(call->outputs, call->num_outputs, "scales");
  const d2k_scalar* group_size = find_scalar(call, "group_size");
  const d2k_scalar* eps = find_scalar(call, "eps");
  if (!x || !q || !s) return fail(call, "expected input x and outputs q, scales");
  if (!group_size || !eps) return fail(call, "expected scalars group_size, eps");
  if (group_size->i != kGroup) {
    return fail(call, "scalar group_size = %lld is not supported (only 128)", (long long)group_size->i);
  }
  if (x->dtype != D2K_BFLOAT16 || q->dtype != D2K_FLOAT8_E4M3 || s->dtype != D2K_FLOAT32) {
    return fail(call, "expected x bf16, q f8e4m3, scales f32 (got dtypes %d, %d, %d)", x->dtype, q->dtype, s->dtype);
  }
  if (x->rank != 2 || q->rank != 2 || s->rank != 2) return fail(call, "expected x, q, scales of rank 2");
  const int64_t T = x->shape[0], I = x->shape[1] / 2;
  if (x->shape[1] != 2 * I || I % kGroup != 0) {
    return fail(call, "x must be [T, 2I] with I a multiple of 128 (got [%lld, %lld])", (long long)T,
                (long long)x->shape[1]);
  }
  const int64_t G = I / kGroup;
  if (q->shape[0] != T || q->shape[1] != I || s->shape[0] != T || s->shape[1] != G) {
    return fail(call, "q must be [T, I] = [%lld, %lld] and scales [T, I / 128]", (long long)T, (long long)I);
  }
  if (T == 0) return 0;
  const int64_t num_groups = T * G;
  if (num_groups >= (int64_t{1} << 31)) {
    return fail(call, "T * I / 128 = %lld groups is more than this kernel indexes", (long long)num_groups);
  }

  Params p;
  p.x = static_cast<const uint16_t*>(x->data);
  p.x_row = x->strides[0];
  p.x_col = x->strides[1];
  p.q = static_cast<uint8_t*>(q->data);
  p.q_row = q->strides[0];
  p.q_col = q->strides[1];
  p.scales = static_cast<float*>(s->data);
  p.s_row = s->strides[0];
  p.s_col = s->strides[1];
  p.inter = I;
  p.num_groups = static_cast<uint32_t>(num_groups);
  p.groups_per_row = Divider::of(static_cast<uint32_t>(G));
  p.eps = static_cast<float>(eps->f);

  // 16-byte loads of both halves and 16-byte stores of q need unit column strides, aligned bases and
  // row strides that keep every row aligned.
  const bool vector_layout = p.x_col == 1 && p.q_col == 1 && aligned(p.x, 16) && aligned(p.q, 16) &&
                             (T == 1 || (p.x_row % 8 == 0 && p.q_row % 16 == 0));
  auto stream = static_cast<cudaStream_t>(call->stream);
  if (vector_layout) {
    const unsigned blocks = static_cast<unsigned>((num_groups + kGroupsPerBlock - 1) / kGroupsPerBlock);
    silu_mul_quant_vec<<<blocks, kThreads, 0, stream>>>(p);
  } else {
    const unsigned blocks = static_cast<unsigned>((num_groups + kThreads - 1) / kThreads);
    silu_mul_quant_strided<<<blocks, kThreads, 0, stream>>>(p);
  }
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return fail(call, "kernel launch failed: %s", cudaGetErrorString(status));
  return 0;
}
