// The few PTX instructions the kernel needs, each wrapped once: cp.async into shared memory, ldmatrix,
// the bf16 tensor-core MMA and the int4 -> bf16 dequantization of two codes.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace w4a16 {

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// An L2 policy for data read exactly once (the weight): evicted first, so that x, which every CTA of a
// column re-reads, stays in L2.
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// 16 bytes global -> shared, through L2 only (.cg), with an L2 eviction policy.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "l"(policy)
               : "memory");
}

// 16 bytes global -> shared, or 16 zero bytes when !valid (source size 0: nothing is read).
__device__ __forceinline__ void cp_async_16_or_zero(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ uint4 lds_128(uint32_t address) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(address));
  return v;
}

// The A operand of one m16n8k16 MMA (16 rows x 16 K of bf16) from shared memory; each lane names one
// row of 16 bytes (lanes 0-15: rows 0-15 at k 0-7, lanes 16-31: rows 0-15 at k 8-15).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&a)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(address));
}

// c += a * b: 16 x 8 fp32 accumulators, bf16 A (16 x 16, row-major) and B (16 x 8, column-major).
__device__ __forceinline__ void mma_bf16_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two codes, at bits 0-3 and 16-19 of `word` (the caller shifts), to the bf16 pair (q - 8) * scale.
// 0x4300 is bf16 128.0, whose mantissa step is 1: OR-ing a nibble into the low mantissa bits gives
// 128 + q exactly (one lop3 for both halves), and subtracting 136 leaves q - 8 exactly. The product with
// the scale (`scale2` holds the same bf16 scale twice) is rounded once to bf16, as Marlin does.
__device__ __forceinline__ uint32_t dequant_pair(uint32_t word, uint32_t scale2) {
  uint32_t biased, centred, scaled;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(biased) : "r"(word), "r"(0x000f000fu), "r"(0x43004300u));
  // biased * 1.0 - 136.0 (exact), then * scale + (-0.0) (one rounding).
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(centred) : "r"(biased), "r"(0x3f803f80u), "r"(0xc308c308u));
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(scaled) : "r"(centred), "r"(scale2), "r"(0x80008000u));
  return scaled;
}

// Both halves of the result hold the bf16 at bits 0-15 (low) or 16-31 (high) of `pair`.
__device__ __forceinline__ uint32_t broadcast_low(uint32_t pair) { return __byte_perm(pair, 0, 0x1010); }
__device__ __forceinline__ uint32_t broadcast_high(uint32_t pair) { return __byte_perm(pair, 0, 0x3232); }

}  // namespace w4a16
