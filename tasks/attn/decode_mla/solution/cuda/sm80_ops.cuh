// The instructions the MLA decode kernel is built from (Ampere-class, all present on sm_90a): cp.async 16-byte
// copies into shared memory with zero fill, ldmatrix (plain and transposed), mma.sync m16n8k16 bf16 with fp32
// accumulators, named barriers, base-2 exponent, and the swizzle that keeps ldmatrix free of bank conflicts.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

namespace mla {

// A tile row of `chunks` 16-byte chunks (a multiple of 8: a 576-wide latent row is 72, a row of 64 bf16
// probabilities is 8) starts at bank 0 whenever its byte length is a multiple of 128. Chunk c of row r sits at
// c ^ (r % 8) within its group of 8, so the 8 rows that one ldmatrix phase reads at the same logical chunk
// land in 8 different groups of 4 banks.
template <int Chunks>
__device__ __forceinline__ uint32_t swizzled(int row, int chunk) {
  static_assert(Chunks % 8 == 0, "rows of whole groups of 8 chunks");
  return static_cast<uint32_t>((row * Chunks + (chunk ^ (row & 7))) * 16);
}

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// 16 bytes from global to shared memory, bypassing L1 (each byte is used once from shared memory); `bytes` 0
// reads nothing and writes 16 zeros.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// Four 8x8 bf16 matrices; lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}
// Two matrices; lanes 0-15 give the addresses (the others' are ignored).
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(address) : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

// c += a b for one m16n8k16 tile: a row-major 16x16, b column-major 16x8, c 16x8 fp32.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A barrier among `threads` threads (a multiple of 32) that use the same id (1..15; 0 is __syncthreads).
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Two floats rounded to nearest even bf16, the first in the low half (the lower column).
__device__ __forceinline__ uint32_t pack_bf16(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

// 2^x by the special function unit (relative error about 2^-22); 2^-inf = 0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace mla
