// Expert solution of quant/w4a16_gemm, first version: one weight-streaming kernel for every M.
//
// Each thread owns 4 adjacent output channels and walks K eight values at a time: one 16-byte load brings
// the 4 int32 words (8 codes each) of its 4 channels, straight from AutoGPTQ's [K / 8, N] layout, which is
// already coalesced along N (so d2k_prepare has nothing to re-lay out for this kernel). The codes become
// bf16 (q - 8) with the magic-number trick (lop3 into the mantissa of 128, one subtraction of 136),
// are multiplied by the group's scale in fp32 (exact) and FMA'd against up to 16 rows of x held in shared
// memory as fp32; one rounding to bf16 at the end. Where the (channel tile x row tile) grid cannot fill
// the 132 SMs, K is split across CTAs: the splits write fp32 partials to the workspace in a fixed layout,
// and a second kernel adds them in split order (deterministic) and rounds once.
//
// What this version lacks: the tensor cores. Beyond M 16 it re-reads the weight once per 16 rows (from
// L2 mostly) and runs the FMAs on the CUDA cores, so it is far from cuBLAS at M 128 and 1024.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr int kThreads = 128;           // one CTA: 128 threads x 4 channels = 512 channels
constexpr int kCols = 4;                // channels per thread (one 16-byte load of int32 words)
constexpr int kTileN = kThreads * kCols;
constexpr int kTileM = 16;              // rows of x per CTA
constexpr int kGroup = 128;
constexpr int kChunk = 256;             // K values of x staged in shared memory at a time (2 groups)
constexpr int kTargetCtas = 2 * 132;    // two waves' worth of CTAs on the H200's 132 SMs

struct Shape {
  int M, N, K;
};

__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Two codes (bits 0-3 and 16-19 of `word` after the caller's shift) -> two fp32 values q - 8.
// 0x4300 is bf16 128.0 with an 8-bit mantissa step of 1.0: OR-ing a nibble into the low mantissa bits
// gives 128 + q exactly; subtracting 136 leaves q - 8 exactly.
__device__ __forceinline__ float2 codes_to_float(uint32_t word) {
  uint32_t bits;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(bits) : "r"(word), "r"(0x000f000fu), "r"(0x43004300u));
  const __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(&bits);
  const float2 f = __bfloat1622float2(v);
  return make_float2(f.x - 136.0f, f.y - 136.0f);
}

// grid: (ceil(N / 512), ceil(M / 16), splits). Each split covers `k_per_split` K values (a multiple of 256).
template <bool kSplit>
__global__ void __launch_bounds__(kThreads) w4a16_stream(const __nv_bfloat16* __restrict__ x,
                                                         const uint32_t* __restrict__ qweight,
                                                         const __nv_bfloat16* __restrict__ scales,
                                                         __nv_bfloat16* __restrict__ y, float* __restrict__ partial,
                                                         Shape s, int k_per_split) {
  __shared__ float xs[kTileM][kChunk];
  const int n0 = blockIdx.x * kTileN + threadIdx.x * kCols;
  const int m0 = blockIdx.y * kTileM;
  const int rows = min(kTileM, s.M - m0);
  const int k_begin = blockIdx.z * k_per_split;
  const int k_end = min(s.K, k_begin + k_per_split);
  const bool active = n0 < s.N;  // N is a multiple of 4: a thread's 4 channels are all in or all out

  float acc[kTileM][kCols];
#pragma unroll
  for (int m = 0; m < kTileM; ++m)
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[m][c] = 0.0f;

  for (int k0 = k_begin; k0 < k_end; k0 += kChunk) {
    const int width = min(kChunk, k_end - k0);  // a multiple of 128
    __syncthreads();
    for (int e = threadIdx.x; e < kTileM * kChunk / 2; e += kThreads) {
      const int m = e / (kChunk / 2), k = (e % (kChunk / 2)) * 2;
      float2 v = make_float2(0.0f, 0.0f);
      if (m < rows && k < width)
        v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(x + (size_t)(m0 + m) * s.K + k0 + k));
      xs[m][k] = v.x;
      xs[m][k + 1] = v.y;
    }
    __syncthreads();
    if (!active) continue;
    for (int g = 0; g < width; g += kGroup) {
      // The group's 4 scales: 8 bytes.
      const uint2 sraw = *reinterpret_cast<const uint2*>(scales + (size_t)((k0 + g) / kGroup) * s.N + n0);
      float sc[kCols];
      {
        const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&sraw.x));
        const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&sraw.y));
        sc[0] = a.x, sc[1] = a.y, sc[2] = b.x, sc[3] = b.y;
      }
      const uint4* wp = reinterpret_cast<const uint4*>(qweight + (size_t)((k0 + g) / 8) * s.N + n0);
#pragma unroll 4
      for (int i = 0; i < kGroup / 8; ++i) {
        const uint4 raw = load_stream(wp + (size_t)i * (s.N / 4));
        const uint32_t words[kCols] = {raw.x, raw.y, raw.z, raw.w};
        const int kk = g + i * 8;
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          float w[8];
          // codes j and j + 4 share one lop3 (bits 4j and 4j + 16).
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float2 f = codes_to_float(words[c] >> (4 * j));
            w[j] = f.x * sc[c];
            w[j + 4] = f.y * sc[c];
          }
#pragma unroll
          for (int m = 0; m < kTileM; ++m) {
            if (m < rows) {
#pragma unroll
              for (int j = 0; j < 8; ++j) acc[m][c] = fmaf(xs[m][kk + j], w[j], acc[m][c]);
            }
          }
        }
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int m = 0; m < kTileM; ++m) {
    if (m >= rows) break;
    if constexpr (kSplit) {
      float4 v = make_float4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]);
      *reinterpret_cast<float4*>(partial + ((size_t)blockIdx.z * s.M + m0 + m) * s.N + n0) = v;
    } else {
      __nv_bfloat162 lo = __floats2bfloat162_rn(acc[m][0], acc[m][1]);
      __nv_bfloat162 hi = __floats2bfloat162_rn(acc[m][2], acc[m][3]);
      uint2 out;
      out.x = *reinterpret_cast<uint32_t*>(&lo);
      out.y = *reinterpret_cast<uint32_t*>(&hi);
      *reinterpret_cast<uint2*>(y + (size_t)(m0 + m) * s.N + n0) = out;
    }
  }
}

// y = bf16(sum over splits of partial[split]), in split order. 4 elements per thread.
__global__ void reduce_splits(const float* __restrict__ partial, __nv_bfloat16* __restrict__ y, size_t count4,
                              int splits) {
  const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= count4) return;
  float4 sum = reinterpret_cast<const float4*>(partial)[i];
  for (int z = 1; z < splits; ++z) {
    const float4 v = reinterpret_cast<const float4*>(partial)[(size_t)z * count4 + i];
    sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
  }
  __nv_bfloat162 lo = __floats2bfloat162_rn(sum.x, sum.y);
  __nv_bfloat162 hi = __floats2bfloat162_rn(sum.z, sum.w);
  uint2 out;
  out.x = *reinterpret_cast<uint32_t*>(&lo);
  out.y = *reinterpret_cast<uint32_t*>(&hi);
  reinterpret_cast<uint2*>(y)[i] = out;
}

int failed(const d2k_call* call, const char* message) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "w4a16_gemm (cuda): %s", message);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

struct Plan {
  Shape s;
  int splits, k_per_split;
};

// Validates the call and picks the split of K.
int plan(const d2k_call* call, Plan* p) {
  const d2k_tensor* x = find(call->inputs, call->num_inputs, "x");
  const d2k_tensor* q = find(call->inputs, call->num_inputs, "qweight");
  const d2k_tensor* sc = find(call->inputs, call->num_inputs, "scales");
  const d2k_tensor* y = find(call->outputs, call->num_outputs, "y");
  if (!x || !q || !sc || !y) return failed(call, "missing one of the inputs x, qweight, scales or the output y");
  if (x->dtype != D2K_BFLOAT16 || q->dtype != D2K_INT32 || sc->dtype != D2K_BFLOAT16 || y->dtype != D2K_BFLOAT16)
    return failed(call, "expects bf16 x, int32 qweight, bf16 scales and bf16 y");
  const int64_t M = x->shape[0], K = x->shape[1], N = q->shape[1];
  if (K % kGroup != 0 || N % 8 != 0 || q->shape[0] != K / 8 || sc->shape[0] != K / kGroup || sc->shape[1] != N ||
      y->shape[0] != M || y->shape[1] != N)
    return failed(call, "shapes disagree: expects x [M, K] (K a multiple of 128), qweight [K/8, N] (N a multiple of 8), scales [K/128, N], y [M, N]");
  if (x->strides[1] != 1 || x->strides[0] != K || q->strides[1] != 1 || q->strides[0] != N || sc->strides[1] != 1 ||
      sc->strides[0] != N || y->strides[1] != 1 || y->strides[0] != N)
    return failed(call, "expects contiguous row-major x, qweight, scales and y");
  if (M > INT32_MAX / 2 || N * K / 8 > INT32_MAX) return failed(call, "shape too large for 32-bit indexing");
  p->s = Shape{static_cast<int>(M), static_cast<int>(N), static_cast<int>(K)};
  const int64_t ctas = ((N + kTileN - 1) / kTileN) * ((M + kTileM - 1) / kTileM);
  const int64_t chunks = (K + kChunk - 1) / kChunk;
  int64_t splits = std::min<int64_t>(chunks, std::max<int64_t>(1, (kTargetCtas + ctas - 1) / ctas));
  const int64_t per = (chunks + splits - 1) / splits;
  splits = (chunks + per - 1) / per;  // no empty split
  p->splits = static_cast<int>(splits);
  p->k_per_split = static_cast<int>(per * kChunk);
  return 0;
}

}  // namespace

extern "C" int d2k_workspace_size(const d2k_call* call, size_t* bytes) {
  Plan p;
  if (plan(call, &p) != 0) return 1;
  *bytes = p.splits > 1 ? sizeof(float) * (size_t)p.splits * p.s.M * p.s.N : 0;
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  Plan p;
  if (plan(call, &p) != 0) return 1;
  const auto* x = static_cast<const __nv_bfloat16*>(find(call->inputs, call->num_inputs, "x")->data);
  const auto* q = static_cast<const uint32_t*>(find(call->inputs, call->num_inputs, "qweight")->data);
  const auto* sc = static_cast<const __nv_bfloat16*>(find(call->inputs, call->num_inputs, "scales")->data);
  auto* y = static_cast<__nv_bfloat16*>(find(call->outputs, call->num_outputs, "y")->data);
  auto stream = static_cast<cudaStream_t>(call->stream);
  const dim3 grid((p.s.N + kTileN - 1) / kTileN, (p.s.M + kTileM - 1) / kTileM, p.splits);
  if (grid.y > 65535) return failed(call, "M too large for this kernel's grid (more than 65535 row tiles)");
  if (p.splits == 1) {
    w4a16_stream<false><<<grid, kThreads, 0, stream>>>(x, q, sc, y, nullptr, p.s, p.k_per_split);
  } else {
    if (!call->workspace || call->workspace_bytes < sizeof(float) * (size_t)p.splits * p.s.M * p.s.N)
      return failed(call, "workspace smaller than d2k_workspace_size asked for");
    auto* partial = static_cast<float*>(call->workspace);
    w4a16_stream<true><<<grid, kThreads, 0, stream>>>(x, q, sc, y, partial, p.s, p.k_per_split);
    const size_t count4 = (size_t)p.s.M * p.s.N / 4;
    reduce_splits<<<(unsigned)((count4 + 255) / 256), 256, 0, stream>>>(partial, y, count4, p.splits);
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return failed(call, cudaGetErrorString(err));
  return 0;
}
