// moe/grouped_topk: expert CUDA solution for the H200 (sm_90a), version 2.
//
// One kernel, one pass over the logits, one token row per warp and four rows per 128-thread block: the
// per-row algorithm (route_row.cuh) keeps a row's scores in its warp's registers and communicates only by
// shuffles, a ballot and a warp reduction per round, with no shared memory and no block barrier. For
// DeepSeek-V3 (256 experts) a lane holds 8 consecutive experts, read with two 16-byte loads of the logits
// and two of the bias; a group is 4 lanes. The kernel is instantiated for the experts a lane holds (NT, the
// smallest of 1, 2, 4, 8, 16, 32 that fits), and for full lanes (no padding slot, no per-slot predicate).
#include <cuda_runtime.h>

#include <cstdint>

#include "d2k/solution.h"
#include "plan.cuh"
#include "route_row.cuh"

namespace {

using gtopk::Problem;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

// The warp's collectives over all 32 lanes, for route_row.
struct DeviceWarp {
  static constexpr unsigned kFull = 0xffffffffu;
  __device__ __forceinline__ float shfl(float v, int src) const { return __shfl_sync(kFull, v, src); }
  __device__ __forceinline__ int shfl(int v, int src) const { return __shfl_sync(kFull, v, src); }
  __device__ __forceinline__ float shfl_xor(float v, int d) const { return __shfl_xor_sync(kFull, v, d); }
  __device__ __forceinline__ unsigned ballot(bool pred) const { return __ballot_sync(kFull, pred); }
  __device__ __forceinline__ int reduce_max(int v) const { return __reduce_max_sync(kFull, v); }
  __device__ __forceinline__ int lowest(unsigned mask) const { return __ffs(static_cast<int>(mask)) - 1; }
};

template <int NT, bool FULL>
__global__ void __launch_bounds__(kThreads) grouped_topk_kernel(Problem p) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long t = static_cast<long long>(blockIdx.x) * kWarps + warp;
  if (t >= p.T) return;  // the whole warp: every collective below has all 32 lanes
  DeviceWarp w;
  gtopk::route_row<NT, FULL>(p, t, lane, w);
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
  switch (nt) {
    case 1: grouped_topk_kernel<1, false><<<blocks, kThreads, 0, stream>>>(p); break;
    case 2: grouped_topk_kernel<2, false><<<blocks, kThreads, 0, stream>>>(p); break;
    case 4:
      if (full) grouped_topk_kernel<4, true><<<blocks, kThreads, 0, stream>>>(p);
      else grouped_topk_kernel<4, false><<<blocks, kThreads, 0, stream>>>(p);
      break;
    case 8:
      if (full) grouped_topk_kernel<8, true><<<blocks, kThreads, 0, stream>>>(p);
      else grouped_topk_kernel<8, false><<<blocks, kThreads, 0, stream>>>(p);
      break;
    case 16:
      if (full) grouped_topk_kernel<16, true><<<blocks, kThreads, 0, stream>>>(p);
      else grouped_topk_kernel<16, false><<<blocks, kThreads, 0, stream>>>(p);
      break;
    default:
      if (full) grouped_topk_kernel<32, true><<<blocks, kThreads, 0, stream>>>(p);
      else grouped_topk_kernel<32, false><<<blocks, kThreads, 0, stream>>>(p);
      break;
  }
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return gtopk::fail(call, "grouped_topk: launch failed: %s", cudaGetErrorString(error));
  return 0;
}
