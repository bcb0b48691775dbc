// moe/align_block_size: expert CUDA solution for the H200 (sm_90a).
//
// One cooperative kernel, three phases split by one grid-wide barrier:
//   1. count: each CTA takes tiles of 2048 entries (CTA c: tiles c, c + grid, ...), histograms their
//      experts in shared memory with shared atomics, and publishes its histogram to the workspace.
//   2. place: after the barrier every CTA reads all histograms (grid x E ints, from L2), so that it knows
//      each expert's total and the entries of the CTAs before it; a block scan of the totals rounded up
//      to the block size gives every expert's start. Each CTA's cursor for expert e is start[e] plus the
//      earlier CTAs' entries of e: the CTAs' ranges inside a segment are disjoint without any global
//      atomic. The CTA that owns expert e (e mod grid) writes e's pads and block ids; all CTAs share the
//      tail (pad value and expert id 0 from the total to the end).
//   3. scatter: each CTA re-reads its tiles (L2 hits) and places every entry at its expert's cursor with a
//      shared atomic. The order inside a segment depends on the atomics' order, which the task allows.
// Every output element is written exactly once; nothing is filled first and overwritten. Small inputs
// (T = 1: eight entries) run as one CTA, where the barrier costs a __syncthreads.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kPerThread = 8;
constexpr int kTile = kThreads * kPerThread;  // entries per CTA per tile

struct Problem {
  const int32_t* ids;
  int32_t* sorted;
  int32_t* expert_ids;
  int32_t* total_out;
  int32_t* counts;  // workspace: [grid][E] per-CTA histograms
  long long N, capacity, num_blocks;
  int E, B;
};

__device__ __forceinline__ int warp_inclusive_scan(int v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += n;
  }
  return v;
}

// Exclusive scan over the CTA; `sum` gets the CTA's total. `scratch` holds kWarps + 1 ints.
__device__ int block_exclusive_scan(int v, int* scratch, int& sum) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int inclusive = warp_inclusive_scan(v);
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    const int w = lane < kWarps ? scratch[lane] : 0;
    const int wi = warp_inclusive_scan(w);
    if (lane < kWarps) scratch[lane] = wi - w;
    if (lane == kWarps - 1) scratch[kWarps] = wi;
  }
  __syncthreads();
  sum = scratch[kWarps];
  const int result = scratch[warp] + inclusive - v;
  __syncthreads();  // scratch is reused by the next scan
  return result;
}

__global__ void __launch_bounds__(kThreads) align_kernel(Problem p) {
  extern __shared__ int smem[];
  int* hist = smem;             // [E] this CTA's entries per expert
  int* cursor = smem + p.E;     // [E] where this CTA's next entry of each expert goes
  int* scratch = cursor + p.E;  // [kWarps + 1]
  const int tid = threadIdx.x, cta = blockIdx.x, ctas = gridDim.x;
  const long long stride = static_cast<long long>(ctas) * kTile;

  for (int e = tid; e < p.E; e += kThreads) hist[e] = 0;
  __syncthreads();
  // Loads of one tile are strided by the CTA width: every load instruction of a warp is one coalesced
  // 128-byte line, and a thread's eight loads are independent.
  for (long long base = static_cast<long long>(cta) * kTile; base < p.N; base += stride) {
    int id[kPerThread];
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const long long i = base + j * kThreads + tid;
      id[j] = i < p.N ? __ldg(p.ids + i) : -1;
    }
#pragma unroll
    for (int j = 0; j < kPerThread; ++j)
      if (id[j] >= 0) atomicAdd(&hist[id[j]], 1);
  }
  __syncthreads();
  for (int e = tid; e < p.E; e += kThreads) p.counts[static_cast<long long>(cta) * p.E + e] = hist[e];

  cg::this_grid().sync();

  int running = 0;
  for (int e0 = 0; e0 < p.E; e0 += kThreads) {
    const int e = e0 + tid;
    int count = 0, before = 0;
    if (e < p.E) {
      for (int c = 0; c < ctas; ++c) {
        const int v = __ldcg(p.counts + static_cast<long long>(c) * p.E + e);  // L2: written by other SMs
        count += v;
        before += c < cta ? v : 0;
      }
    }
    const int padded = (count + p.B - 1) / p.B * p.B;
    int chunk_total;
    const int start = running + block_exclusive_scan(padded, scratch, chunk_total);
    if (e < p.E) {
      cursor[e] = start + before;
      if (e % ctas == cta) {
        for (int q = start + count; q < start + padded; ++q) p.sorted[q] = static_cast<int32_t>(p.N);
        for (int b = start / p.B; b < (start + padded) / p.B; ++b) p.expert_ids[b] = e;
      }
    }
    running += chunk_total;
  }
  const int total = running;
  if (cta == 0 && tid == 0) *p.total_out = total;
  for (long long q = total + static_cast<long long>(cta) * kThreads + tid; q < p.capacity;
       q += static_cast<long long>(ctas) * kThreads)
    p.sorted[q] = static_cast<int32_t>(p.N);
  for (long long b = total / p.B + static_cast<long long>(cta) * kThreads + tid; b < p.num_blocks;
       b += static_cast<long long>(ctas) * kThreads)
    p.expert_ids[b] = 0;
  __syncthreads();  // cursors ready

  for (long long base = static_cast<long long>(cta) * kTile; base < p.N; base += stride) {
    int id[kPerThread];
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const long long i = base + j * kThreads + tid;
      id[j] = i < p.N ? __ldg(p.ids + i) : -1;
    }
#pragma unroll
    for (int j = 0; j < kPerThread; ++j)
      if (id[j] >= 0) p.sorted[atomicAdd(&cursor[id[j]], 1)] = static_cast<int32_t>(base + j * kThreads + tid);
  }
}

int fail(const d2k_call* call, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(call->error, D2K_ERROR_CAPACITY, format, args);
  va_end(args);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int n, const char* name) {
  for (int i = 0; i < n; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

long long scalar_of(const d2k_call* call, const char* name, long long otherwise) {
  for (int i = 0; i < call->num_scalars; ++i)
    if (call->scalars[i].name && std::strcmp(call->scalars[i].name, name) == 0) return call->scalars[i].i;
  return otherwise;
}

size_t shared_bytes(int E) { return (2 * static_cast<size_t>(E) + kWarps + 1) * sizeof(int); }

// CTAs wanted: one per tile, at least one.
long long tiles_of(long long N) { return N > 0 ? (N + kTile - 1) / kTile : 1; }

}  // namespace

extern "C" int d2k_workspace_size(const d2k_call* call, size_t* bytes) {
  const d2k_tensor* ids = find(call->inputs, call->num_inputs, "topk_ids");
  const long long E = scalar_of(call, "num_experts", 0);
  if (!ids || ids->rank != 2 || E < 1) return fail(call, "align_block_size: need topk_ids [T, k] and num_experts >= 1");
  *bytes = static_cast<size_t>(tiles_of(ids->shape[0] * ids->shape[1])) * E * sizeof(int32_t);
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* ids = find(call->inputs, call->num_inputs, "topk_ids");
  const d2k_tensor* sorted = find(call->outputs, call->num_outputs, "sorted_token_ids");
  const d2k_tensor* blocks = find(call->outputs, call->num_outputs, "expert_ids");
  const d2k_tensor* total = find(call->outputs, call->num_outputs, "num_tokens_post_pad");
  if (!ids || !sorted || !blocks || !total)
    return fail(call, "align_block_size: expected topk_ids, sorted_token_ids, expert_ids, num_tokens_post_pad");
  if (ids->dtype != D2K_INT32 || sorted->dtype != D2K_INT32 || blocks->dtype != D2K_INT32 || total->dtype != D2K_INT32)
    return fail(call, "align_block_size: every tensor is int32");
  const long long E = scalar_of(call, "num_experts", 0), B = scalar_of(call, "block_size", 0);
  const long long N = ids->shape[0] * ids->shape[1];
  if (ids->rank != 2 || ids->strides[1] != 1 || ids->strides[0] != ids->shape[1])
    return fail(call, "align_block_size: topk_ids must be a row-major [T, k] tensor");
  if (E < 1 || B < 1 || sorted->shape[0] != N + E * (B - 1) || blocks->shape[0] != (sorted->shape[0] + B - 1) / B ||
      sorted->strides[0] != 1 || blocks->strides[0] != 1)
    return fail(call, "align_block_size: outputs of %lld and %lld elements do not fit N=%lld, E=%lld, B=%lld",
                (long long)sorted->shape[0], (long long)blocks->shape[0], N, E, B);
  if (sorted->shape[0] > INT32_MAX || shared_bytes(E) > 48 * 1024)
    return fail(call, "align_block_size: %lld positions or %lld experts are more than this kernel handles",
                (long long)sorted->shape[0], E);

  // How many CTAs can be resident at once: the barrier needs every CTA of the grid on the GPU.
  static int device = -1, resident = 0, resident_experts = -1;
  int current;
  if (cudaGetDevice(&current) != cudaSuccess) return fail(call, "align_block_size: cudaGetDevice failed");
  if (current != device || E != resident_experts) {
    int sms = 0, per_sm = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, current);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, align_kernel, kThreads, shared_bytes(E));
    device = current, resident = sms * per_sm, resident_experts = static_cast<int>(E);
  }
  if (resident < 1) return fail(call, "align_block_size: no CTA of the kernel fits on this GPU");
  const long long wanted = tiles_of(N);
  const int grid = static_cast<int>(wanted < resident ? wanted : resident);
  if (call->workspace_bytes < static_cast<size_t>(grid) * E * sizeof(int32_t))
    return fail(call, "align_block_size: workspace of %zu bytes, need %lld", call->workspace_bytes,
                (long long)grid * E * 4);

  Problem p{static_cast<const int32_t*>(ids->data), static_cast<int32_t*>(sorted->data),
            static_cast<int32_t*>(blocks->data), static_cast<int32_t*>(total->data),
            static_cast<int32_t*>(call->workspace), N, sorted->shape[0], blocks->shape[0], static_cast<int>(E),
            static_cast<int>(B)};
  void* args[] = {&p};
  const cudaError_t launched = cudaLaunchCooperativeKernel(reinterpret_cast<void*>(align_kernel), dim3(grid),
                                                           dim3(kThreads), args, shared_bytes(E),
                                                           static_cast<cudaStream_t>(call->stream));
  if (launched != cudaSuccess) return fail(call, "align_block_size: launch failed: %s", cudaGetErrorString(launched));
  return 0;
}
