// The prepared layout of the weight and the scales (written once by d2k_prepare), in the order the MMA
// consumes them.
//
// mma.sync m16n8k16's B operand (16 K x 8 N) gives lane l = 4g + t the values B[2t, g], B[2t + 1, g] in
// its first register and B[2t + 8, g], B[2t + 9, g] in its second. The weight is cut into blocks of
// 16 K x 64 N (eight such operands side by side: subtiles j = 0..7 at columns 8j .. 8j + 7); a block is
// 512 bytes, lane l's 16 of them hold its 32 codes:
//
//   word i (0..3) of lane l covers subtiles 2i and 2i + 1 of column g; its pair p (0..3) sits at bits
//   4p .. 4p + 3 (first K) and 4p + 16 .. 4p + 19 (second K), where
//     p = 0: subtile 2i,     k = 2t, 2t + 1          p = 1: subtile 2i,     k = 2t + 8, 2t + 9
//     p = 2: subtile 2i + 1, k = 2t, 2t + 1          p = 3: subtile 2i + 1, k = 2t + 8, 2t + 9
//
// so that `word >> 4p` puts the pair where the lop3 dequantization wants it (ptx.cuh dequant_pair), and
// one 16-byte shared-memory load per lane gives 8 MMAs' B registers. Blocks are stored K-block-major:
// block (kb, nb) at ((kb * NB) + nb) * 512 bytes, NB = Npad / 64, N padded to a multiple of kPadN with
// code 8 (a zero weight). The scales are cut alike, one 128-byte block per (group, nb): lane group g
// reads 16 bytes at g * 16, the scales of columns 8j + g for j = 0..7.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace w4a16 {

constexpr int kGroup = 128;  // K values per scale
constexpr int kPadN = 256;   // the widest CTA tile: every tile's weight lies inside the padded buffer

struct PreparedLayout {
  int N, K, Npad, NB;  // NB: 64-wide column blocks
  __host__ __device__ static PreparedLayout of(int N, int K) {
    const int Npad = (N + kPadN - 1) / kPadN * kPadN;
    return PreparedLayout{N, K, Npad, Npad / 64};
  }
  __host__ __device__ size_t weight_bytes() const { return (size_t)K * Npad / 2; }
  __host__ __device__ size_t scale_bytes() const { return (size_t)(K / kGroup) * Npad * 2; }
};

// Which (k, n) the codes of pair p of word i of lane `lane` in block (kb, nb) are: the first of the two
// K values (the second is k + 1) and the column.
struct PairPlace {
  int k, n;
};
__host__ __device__ inline PairPlace pair_place(int kb, int nb, int lane, int word, int pair) {
  const int g = lane / 4, t = lane % 4;
  const int subtile = 2 * word + (pair >> 1);
  return PairPlace{kb * 16 + 2 * t + 8 * (pair & 1), nb * 64 + subtile * 8 + g};
}

// The code of (k, n) in AutoGPTQ's layout; columns past N read as 8 (weight zero).
__host__ __device__ inline uint32_t gptq_code(const uint32_t* qweight, int N, int k, int n) {
  if (n >= N) return 8u;
  return (qweight[(size_t)(k / 8) * N + n] >> (4 * (k % 8))) & 15u;
}

// One prepared word: index = ((kb * NB + nb) * 32 + lane) * 4 + word.
__host__ __device__ inline uint32_t prepared_word(const uint32_t* qweight, const PreparedLayout& L, size_t index) {
  const int word = (int)(index % 4);
  const int lane = (int)(index / 4 % 32);
  const size_t block = index / 128;
  const int nb = (int)(block % L.NB), kb = (int)(block / L.NB);
  uint32_t out = 0;
  for (int pair = 0; pair < 4; ++pair) {
    const PairPlace at = pair_place(kb, nb, lane, word, pair);
    out |= gptq_code(qweight, L.N, at.k, at.n) << (4 * pair);
    out |= gptq_code(qweight, L.N, at.k + 1, at.n) << (4 * pair + 16);
  }
  return out;
}

// One prepared scale: index = ((group * NB + nb) * 8 + g) * 8 + j holds the scale of column nb * 64 + 8j + g
// (zero past N).
__host__ __device__ inline int prepared_scale_column(const PreparedLayout& L, size_t index, int* group) {
  const int j = (int)(index % 8), g = (int)(index / 8 % 8);
  const size_t block = index / 64;
  *group = (int)(block / L.NB);
  return (int)(block % L.NB) * 64 + 8 * j + g;
}

__global__ void prepare_weight(const uint32_t* __restrict__ qweight, PreparedLayout L, uint32_t* __restrict__ out) {
  const size_t words = L.weight_bytes() / 4;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    out[i] = prepared_word(qweight, L, i);
}

__global__ void prepare_scales(const __nv_bfloat16* __restrict__ scales, PreparedLayout L,
                               __nv_bfloat16* __restrict__ out) {
  const size_t count = L.scale_bytes() / 2;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
    int group = 0;
    const int n = prepared_scale_column(L, i, &group);
    out[i] = n < L.N ? scales[(size_t)group * L.N + n] : __float2bfloat16(0.0f);
  }
}

}  // namespace w4a16
