// The Ampere-class instructions the FlashAttention-2 tile loop is built from (all present on sm_90a), copied
// from attn/prefill_causal_gqa's expert (the same file there), the swizzle generalized to head dim 64:
// cp.async 16-byte copies into shared memory, ldmatrix (plain and transposed), mma.sync m16n8k16 bf16 with
// fp32 accumulators, and the swizzled shared-memory layout that keeps ldmatrix free of bank conflicts.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

namespace sliding {

// A [rows][D] bf16 tile in shared memory is Chunks = D / 8 chunks of 16 bytes per row (16 at D 128, 8 at
// D 64). Chunk c of row r sits at chunk position c ^ (r % 8) of its row: the 8 rows one ldmatrix phase reads
// (same logical chunk, consecutive rows) then fall in 8 different 16-byte bank groups. At D 64 a row is 128
// bytes, exactly the 32 banks, and the 8 positions c ^ 0 .. c ^ 7 are all 8 of its chunks.
template <int Chunks>
__device__ __forceinline__ uint32_t swizzled_offset(int row, int chunk) {
  static_assert(Chunks >= 8, "the XOR with row % 8 must stay inside the row");
  return static_cast<uint32_t>((row * Chunks + (chunk ^ (row & 7))) * 16);
}

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// 16 bytes from global to shared memory, bypassing L1; `bytes` 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

// Four 8x8 bf16 matrices; lane l gives the row address of matrix l / 8, row l % 8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// c += a b for one m16n8k16 tile: a row-major 16x16, b column-major 16x8, c 16x8 fp32.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
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

}  // namespace sliding
