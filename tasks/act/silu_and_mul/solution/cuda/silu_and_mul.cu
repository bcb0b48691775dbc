// Expert CUDA solution of act/silu_and_mul for the H200 (sm_90a).
//
// Memory-bound: the floor is one read of x (both halves) and one write of out, about 10 flops per 6
// bytes. The whole tensor is one flat range of vectors (V bf16 elements of the gate half, the matching V
// of the up half, V of the output); each thread loads two such vectors before it computes, so that every
// SM keeps enough loads in flight to cover DRAM latency, and rows of any width fill the grid (a row per
// CTA would leave most threads of Qwen3's 768-wide rows idle). silu uses the hardware exp2 and
// reciprocal (the originals use __expf too); its result is rounded to bf16 and multiplied by the up
// value in one bf16x2 fma, which rounds the exact product once: the two roundings of the description.
// Layouts the 16-byte path cannot take (widths or row strides that are no multiple of 8, misaligned
// pointers) use the widest vector that fits; a last dimension that is not contiguous uses a plain
// strided kernel.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr int kThreads = 256;
constexpr int kVecsPerThread = 2;  // loads in flight per thread before the first use

struct Args {
  const __nv_bfloat16* x;
  __nv_bfloat16* out;
  int64_t x_row, out_row;  // row strides, elements
  int64_t x_col, out_col;  // last-dimension strides (the strided kernel only)
  int64_t rows;
  int64_t width;  // I
};

// bf16(silu(g)) for a pair, as a packed bf16x2: g * 1/(1 + 2^(-g log2 e)). For g below about -88 the
// exp overflows to +inf, its reciprocal is 0 and silu is -0, what the exact value rounds to.
__device__ __forceinline__ __nv_bfloat162 silu_pair(__nv_bfloat162 g) {
  const float2 f = __bfloat1622float2(g);
  const float a = __fdividef(f.x, 1.0f + __expf(-f.x));
  const float b = __fdividef(f.y, 1.0f + __expf(-f.y));
  return __floats2bfloat162_rn(a, b);
}

// out = bf16(bf16(silu(g)) * u) for a pair: the product of two bf16 values is exact in fp32, so the fma
// with -0 rounds it once, as bf16(float(s) * float(u)) would.
__device__ __forceinline__ __nv_bfloat162 gate_pair(__nv_bfloat162 g, __nv_bfloat162 u) {
  return __hmul2(silu_pair(g), u);
}

// V bf16 elements, loaded and stored as one machine word of 2V bytes (a 16-byte vector for V = 8).
template <int V> struct Word;
template <> struct Word<8> { using type = uint4; };
template <> struct Word<4> { using type = uint2; };
template <> struct Word<2> { using type = uint32_t; };
template <> struct Word<1> { using type = uint16_t; };

template <int V>
union Pack {
  typename Word<V>::type word;
  uint32_t pair[V / 2];  // bf16x2 bits
};

template <>
union Pack<1> {
  uint16_t word;
};

__device__ __forceinline__ __nv_bfloat162 as_pair(uint32_t bits) {
  __nv_bfloat162 pair;
  memcpy(&pair, &bits, sizeof bits);
  return pair;
}

__device__ __forceinline__ uint32_t bits_of(__nv_bfloat162 pair) {
  uint32_t bits;
  memcpy(&bits, &pair, sizeof bits);
  return bits;
}

template <int V>
__device__ __forceinline__ Pack<V> gate(const Pack<V>& g, const Pack<V>& u) {
  Pack<V> out;
  if constexpr (V == 1) {
    const uint32_t r = bits_of(gate_pair(as_pair(g.word), as_pair(u.word)));
    out.word = static_cast<uint16_t>(r);
  } else {
#pragma unroll
    for (int j = 0; j < V / 2; ++j) out.pair[j] = bits_of(gate_pair(as_pair(g.pair[j]), as_pair(u.pair[j])));
  }
  return out;
}

// Contiguous last dimension; width, row strides and pointers all multiples of V elements. `first_row`
// and `rows` bound a slice whose vector count fits in 32 bits (the host splits larger tensors).
template <int V>
__global__ void __launch_bounds__(kThreads) silu_and_mul_vec(Args args, int64_t first_row, uint32_t vecs_per_row,
                                                             uint32_t vecs) {
  const uint32_t base = blockIdx.x * (kThreads * kVecsPerThread) + threadIdx.x;
  Pack<V> g[kVecsPerThread], u[kVecsPerThread];
  int64_t out_at[kVecsPerThread];
  // All loads first: two independent pairs of loads per thread are in flight together.
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    const uint32_t v = base + k * kThreads;
    out_at[k] = -1;
    if (v >= vecs) continue;
    const uint32_t row = v / vecs_per_row;
    const uint32_t col = (v - row * vecs_per_row) * V;
    const auto* in = args.x + (first_row + row) * args.x_row + col;
    using W = typename Word<V>::type;
    g[k].word = __ldg(reinterpret_cast<const W*>(in));
    u[k].word = __ldg(reinterpret_cast<const W*>(in + args.width));
    out_at[k] = (first_row + row) * args.out_row + col;
  }
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k)
    if (out_at[k] >= 0) *reinterpret_cast<typename Word<V>::type*>(args.out + out_at[k]) = gate<V>(g[k], u[k]).word;
}

// Any strides: one element per thread, grid-stride.
__global__ void __launch_bounds__(kThreads) silu_and_mul_strided(Args args) {
  const int64_t total = args.rows * args.width;
  for (int64_t e = blockIdx.x * int64_t{kThreads} + threadIdx.x; e < total; e += int64_t{gridDim.x} * kThreads) {
    const int64_t row = e / args.width, col = e - row * args.width;
    const __nv_bfloat16 g = args.x[row * args.x_row + col * args.x_col];
    const __nv_bfloat16 u = args.x[row * args.x_row + (args.width + col) * args.x_col];
    args.out[row * args.out_row + col * args.out_col] =
        __low2bfloat16(gate_pair(__bfloat162bfloat162(g), __bfloat162bfloat162(u)));
  }
}

int failed(const d2k_call* call, const char* what) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "silu_and_mul (cuda): %s", what);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

// The widest vector (8, 4, 2 or 1 elements) that the width, both row strides and both pointers allow.
int vector_width(const Args& a) {
  for (int v : {8, 4, 2}) {
    const auto bytes = static_cast<uintptr_t>(2 * v);
    if (a.width % v == 0 && a.x_row % v == 0 && a.out_row % v == 0 && reinterpret_cast<uintptr_t>(a.x) % bytes == 0 &&
        reinterpret_cast<uintptr_t>(a.out) % bytes == 0)
      return v;
  }
  return 1;
}

template <int V>
int launch_vec(const Args& args, cudaStream_t stream) {
  const auto vecs_per_row = static_cast<uint32_t>(args.width / V);
  // Slices of rows whose vector count stays below 2^31: 32-bit index arithmetic in the kernel.
  const int64_t rows_per_slice = std::max<int64_t>(1, (int64_t{1} << 31) / vecs_per_row - 1);
  for (int64_t first = 0; first < args.rows; first += rows_per_slice) {
    const int64_t rows = std::min(rows_per_slice, args.rows - first);
    const auto vecs = static_cast<uint32_t>(rows * vecs_per_row);
    const uint32_t blocks = (vecs + kThreads * kVecsPerThread - 1) / (kThreads * kVecsPerThread);
    silu_and_mul_vec<V><<<blocks, kThreads, 0, stream>>>(args, first, vecs_per_row, vecs);
  }
  return 0;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* x = find(call->inputs, call->num_inputs, "x");
  const d2k_tensor* out = find(call->outputs, call->num_outputs, "out");
  if (!x || !out) return failed(call, "missing the input 'x' or the output 'out'");
  if (x->dtype != D2K_BFLOAT16 || out->dtype != D2K_BFLOAT16 || x->rank != 2 || out->rank != 2)
    return failed(call, "expects rank-2 bf16 tensors");
  if (out->shape[0] != x->shape[0] || x->shape[1] != 2 * out->shape[1]) return failed(call, "expects x [T, 2I] and out [T, I]");
  Args args;
  args.x = static_cast<const __nv_bfloat16*>(x->data);
  args.out = static_cast<__nv_bfloat16*>(out->data);
  args.x_row = x->strides[0];
  args.out_row = out->strides[0];
  args.x_col = x->strides[1];
  args.out_col = out->strides[1];
  args.rows = x->shape[0];
  args.width = out->shape[1];
  if (args.rows == 0 || args.width == 0) return 0;
  const auto stream = static_cast<cudaStream_t>(call->stream);
  if (args.x_col != 1 || args.out_col != 1) {
    const int64_t blocks = std::min<int64_t>((args.rows * args.width + kThreads - 1) / kThreads, 132 * 16);
    silu_and_mul_strided<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args);
  } else {
    switch (vector_width(args)) {
      case 8: launch_vec<8>(args, stream); break;
      case 4: launch_vec<4>(args, stream); break;
      case 2: launch_vec<2>(args, stream); break;
      default: launch_vec<1>(args, stream); break;
    }
  }
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return failed(call, cudaGetErrorString(error));
  return 0;
}
