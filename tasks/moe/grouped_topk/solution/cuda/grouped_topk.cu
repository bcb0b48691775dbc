// moe/grouped_topk: expert CUDA solution for the H200 (sm_90a), version 3.
//
// One kernel, one pass over the logits, one token row per warp and four rows per 128-thread block: the
// per-row algorithm (route_row.cuh) keeps a row's scores in its warp's registers and communicates by
// shuffles, ballots and one warp reduction per round, with no block barrier; each warp has its own shared
// memory for its row's scores and the round winners' ids (read after a __syncwarp). For
// DeepSeek-V3 (256 experts) a lane holds 8 consecutive experts, read with two 16-byte loads of the bias and
// two of the logits; a group is 4 lanes. The kernel is instantiated for the experts a lane holds (NT, the
// smallest of 1, 2, 4, 8, 16, 32 that fits), for full lanes (no padding slot, no per-slot predicate), for 8
// group slots (DeepSeek-V2's grouping) with the group count at compile time, and for DeepSeek-V3's shape
// with everything at compile time and the kept groups' experts spread over the warp (route_loaded_spread).
//
// Many rows of DeepSeek-V3's shape (T > 2048) take version 2's kernel instead (route_row_v2.cuh, its per-row
// algorithm unchanged): on the H200 the spread kernel is the faster one while its rows' latency is the time
// (T1 4.4 us against v2's 5.8, T999 5.7 against 6.7) and the slower one when many rows share each SM (T4096
// 12.7 against 9.2, T16384 33.8 against 20.1). Nsight Compute at T16384: the spread kernel issues half of
// v2's instructions (6.8M against 13.4M) but in 25% of the issue slots against v2's 80%, 0.61 eligible warps
// a scheduler against 3.6, stalled mostly on long (16 cycles an issue) and short (10) scoreboards, with 15x
// v2's shared-memory bank conflicts (300k); v3's generic kernel without the spread issues 16.7M (71% busy).
// The cause of the long-scoreboard stalls is not yet pinned down (tasks/moe/grouped_topk/notes.md).
#include <cuda_runtime.h>

#include <cstdint>

#include "d2k/solution.h"
#include "plan.cuh"
#include "route_row.cuh"
#include "route_row_v2.cuh"

namespace {

using gtopk::Problem;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

// The warp's collectives over all 32 lanes, for route_row (both versions').
struct DeviceWarp {
  static constexpr unsigned kFull = 0xffffffffu;
  __device__ __forceinline__ float shfl(float v, int src) const { return __shfl_sync(kFull, v, src); }
  __device__ __forceinline__ int shfl(int v, int src) const { return __shfl_sync(kFull, v, src); }  // (version 2's)
  __device__ __forceinline__ float shfl_xor(float v, int d) const { return __shfl_xor_sync(kFull, v, d); }
  __device__ __forceinline__ unsigned ballot(bool pred) const { return __ballot_sync(kFull, pred); }
  __device__ __forceinline__ int reduce_max(int v) const { return __reduce_max_sync(kFull, v); }
  __device__ __forceinline__ int lowest(unsigned mask) const { return __ffs(static_cast<int>(mask)) - 1; }  // (version 2's)
  __device__ __forceinline__ void sync() const { __syncwarp(kFull); }
  // A predicated st.shared at an address converted once per warp: written as "if (pred) *p = v", the
  // compiler sinks the generic-to-shared conversion of p into each round's conditional store and ptxas
  // predicates all of it (five instructions a round).
  __device__ __forceinline__ void store_if(int* p, int v, bool pred) const {
    const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(p));
    asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %2, 0;\n\t@q st.shared.b32 [%0], %1;\n\t}" ::"r"(address), "r"(v),
                 "r"(static_cast<unsigned>(pred))
                 : "memory");
  }
  __device__ __forceinline__ unsigned lt_mask() const {
    unsigned mask;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(mask));
    return mask;
  }
};

template <int NT, bool FULL, int GSC, int KC, int KEEPC>
__global__ void __launch_bounds__(kThreads) grouped_topk_kernel(Problem p) {
  __shared__ alignas(16) float buf[kWarps][(KEEPC != 0 ? 64 : 32) * NT];
  __shared__ int rec[kWarps][gtopk::kMaxK];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long t = static_cast<long long>(blockIdx.x) * kWarps + warp;
  if (t >= p.T) return;  // the whole warp: every collective below has all 32 lanes
  DeviceWarp w;
  gtopk::route_row<NT, FULL, GSC, KC, KEEPC>(p, t, lane, w, buf[warp], rec[warp]);
}

__global__ void __launch_bounds__(kThreads) many_rows_kernel(Problem p) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long t = static_cast<long long>(blockIdx.x) * kWarps + warp;
  if (t >= p.T) return;
  DeviceWarp w;
  gtopk_v2::route_row<8, true>(p, t, lane, w);
}

template <int NT, bool FULL, int GSC, int KC, int KEEPC>
void launch(const Problem& p, unsigned blocks, cudaStream_t stream) {
  grouped_topk_kernel<NT, FULL, GSC, KC, KEEPC><<<blocks, kThreads, 0, stream>>>(p);
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  Problem p;
  int nt = 0;
  bool full = false;
  if (gtopk::plan(call, p, nt, full) != 0) return 1;
  if (p.T == 0) return 0;
  const unsigned blocks = static_cast<unsigned>((p.T + kWarps - 1) / kWarps);
  const cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const bool g8 = p.group_slots == 8;
  switch (nt) {
    case 1: launch<1, false, 0, 0, 0>(p, blocks, stream); break;
    case 2: launch<2, false, 0, 0, 0>(p, blocks, stream); break;
    case 4:
      if (full) launch<4, true, 0, 0, 0>(p, blocks, stream);
      else launch<4, false, 0, 0, 0>(p, blocks, stream);
      break;
    case 8:
      // DeepSeek-V3 (256 experts, 8 groups, 4 kept, k 8): everything at compile time, the kept experts
      // spread over the warp. DeepSeek-V2's grouping (160 experts in 8 groups of 20: 5 a lane, not full)
      // keeps the group count at compile time.
      if (full && g8 && p.k == 8 && p.keep == 4 && p.T > 2048) many_rows_kernel<<<blocks, kThreads, 0, stream>>>(p);
      else if (full && g8 && p.k == 8 && p.keep == 4) launch<8, true, 8, 8, 4>(p, blocks, stream);
      else if (full) launch<8, true, 0, 0, 0>(p, blocks, stream);
      else if (g8) launch<8, false, 8, 0, 0>(p, blocks, stream);
      else launch<8, false, 0, 0, 0>(p, blocks, stream);
      break;
    case 16:
      if (full) launch<16, true, 0, 0, 0>(p, blocks, stream);
      else launch<16, false, 0, 0, 0>(p, blocks, stream);
      break;
    default:
      if (full) launch<32, true, 0, 0, 0>(p, blocks, stream);
      else launch<32, false, 0, 0, 0>(p, blocks, stream);
      break;
  }
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return gtopk::fail(call, "grouped_topk: launch failed: %s", cudaGetErrorString(error));
  return 0;
}
