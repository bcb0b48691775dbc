// Expert CUDA solution of attn/prefill_causal_gqa for the H200 (sm_90a), third version: the Hopper tile loop
// (hopper_tile.cuh: TMA, wgmma, a producer warpgroup and two consumers) in persistent CTAs over a
// longest-first list of work items (schedule.cuh).
//
// Two launches on the call's stream: schedule_tiles (one CTA) reads cu_seqlens on the device and writes the
// sorted list of (sequence, query tile) into the workspace; prefill_attention runs one CTA per listed tile
// and query head, in that order. The grid is sized by the bound ceil(T / BM) + B on the tile count, known
// from the shapes alone, so nothing goes back to the host; CTAs past the real count return at once.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"
#include "hopper_tile.cuh"
#include "schedule.cuh"

namespace {

using prefill::Params;
using prefill::ScheduleView;
using prefill::TileWork;

// Persistent: one CTA per SM (165 KB of shared memory) walks the longest-first list of work items (query tile,
// head) in rounds of one item per CTA, CTA i taking item i of even rounds and item G - 1 - i of odd ones (G
// CTAs): a plain stride would give CTA 0 the costliest item of every round, a snake evens the sums out.
// Warpgroup 0 loads, warpgroups 1 and 2 compute. The rings and Q's barriers carry on from one item to the
// next, so the next item's Q and first K tiles load while the consumers finish the item before (its last
// P V and its stores).
__global__ void __launch_bounds__(prefill::kThreads, 1)
    prefill_attention(const __grid_constant__ Params params, const int* __restrict__ tile_count,
                      const TileWork* __restrict__ order) {
  extern __shared__ unsigned char shared[];
  auto& smem = *reinterpret_cast<prefill::SharedStorage*>((reinterpret_cast<uintptr_t>(shared) + 1023) & ~uintptr_t{1023});
  const int items = *tile_count * params.heads;
  if (static_cast<int>(blockIdx.x) >= items) return;  // (then also every later round's item)
  if (threadIdx.x == 0) {
    using Barrier = cutlass::arch::ClusterBarrier;
    Barrier::init(&smem.q_full, 1);
    Barrier::init(&smem.q_empty, prefill::kConsumers);
    for (int s = 0; s < prefill::kStages; ++s) {
      Barrier::init(&smem.k_full[s], 1);
      Barrier::init(&smem.v_full[s], 1);
      Barrier::init(&smem.k_empty[s], prefill::kConsumers);
      Barrier::init(&smem.v_empty[s], prefill::kConsumers);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();
  // Each side's loop sits inside its own register reallocation (ptxas sizes the code a setmaxnreg dominates
  // by its count; a loop shared by both sides would be held to the launch's 168 and spill).
  const int grid = static_cast<int>(gridDim.x), cta = static_cast<int>(blockIdx.x);
  const auto for_each_item = [&](auto&& body) {
    for (int item = 0;; ++item) {
      const int x = item * grid + (item % 2 == 0 ? cta : grid - 1 - cta);
      if (x >= items) return;
      const TileWork work = order[x / params.heads];
      const int seq_start = params.cu_seqlens[work.seq];
      const int length = params.cu_seqlens[work.seq + 1] - seq_start;
      body(item, work, x % params.heads, seq_start, length,
           prefill::key_tiles(work.q_tile, length, prefill::kBlockM, prefill::kBlockN));
    }
  };
  prefill::Ring k_ring, v_ring;
  if (threadIdx.x < 128) {
    cutlass::arch::warpgroup_reg_dealloc<prefill::kProducerRegisters>();
    if (threadIdx.x != 0) return;
    for_each_item([&](int item, const TileWork& work, int head, int seq_start, int, int key_tiles) {
      prefill::producer(params, smem, work, head, seq_start, key_tiles, item, k_ring, v_ring);
    });
  } else {
    cutlass::arch::warpgroup_reg_alloc<prefill::kConsumerRegisters>();
    for_each_item([&](int item, const TileWork& work, int head, int seq_start, int length, int key_tiles) {
      prefill::consumer(params, smem, work, head, seq_start, length, key_tiles, static_cast<int>(threadIdx.x) - 128, item,
                        k_ring, v_ring);
    });
  }
}

int failed(const d2k_call* call, const char* what) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "prefill_causal_gqa (cuda): %s", what);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

// The workspace: the schedule's arrays, each 16-byte aligned.
struct Layout {
  size_t count = 0, order = 0, listing = 0, cost = 0, first_tile = 0, bytes = 0;
};
size_t align16(size_t bytes) { return (bytes + 15) / 16 * 16; }
Layout layout_for(int64_t tokens, int64_t batch) {
  const int64_t bound = (tokens + prefill::kBlockM - 1) / prefill::kBlockM + batch;
  Layout l;
  l.order = 16;
  l.listing = l.order + align16(bound * sizeof(TileWork));
  l.cost = l.listing + align16(bound * sizeof(TileWork));
  l.first_tile = l.cost + align16(bound * sizeof(int));
  l.bytes = l.first_tile + align16((batch + 1) * sizeof(int));
  return l;
}

struct Tensors {
  const d2k_tensor *q, *k, *v, *cu, *o, *lse;
};

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Everything the kernels assume, checked: a message naming what is off, or nullptr.
const char* unsupported(const Tensors& t) {
  if (!t.q || !t.k || !t.v || !t.cu || !t.o || !t.lse) return "missing one of q, k, v, cu_seqlens, o, lse";
  for (const d2k_tensor* x : {t.q, t.k, t.v, t.o})
    if (x->rank != 3 || x->dtype != D2K_BFLOAT16) return "q, k, v, o must be [T, H, D] bf16";
  if (t.lse->rank != 2 || t.lse->dtype != D2K_FLOAT32) return "lse must be [Hq, T] fp32";
  if (t.cu->rank != 1 || t.cu->dtype != D2K_INT32 || t.cu->shape[0] < 2 || t.cu->strides[0] != 1)
    return "cu_seqlens must be a contiguous int32 [B + 1], B >= 1";
  for (const d2k_tensor* x : {t.q, t.k, t.v, t.o}) {
    if (x->shape[2] != prefill::kHeadDim) return "the head dim must be 128";
    if (x->strides[2] != 1 || x->strides[0] % 8 != 0 || x->strides[1] % 8 != 0 || !aligned16(x->data))
      return "q, k, v, o need a contiguous head dim, 16-byte aligned rows";
  }
  if (t.k->shape[1] < 1 || t.q->shape[1] % t.k->shape[1] != 0 || t.v->shape[1] != t.k->shape[1])
    return "Hq must be a multiple of Hkv, and v must have Hkv heads";
  if (t.q->shape[0] >= (int64_t{1} << 31)) return "T must fit in 31 bits";
  return nullptr;
}

Tensors tensors_of(const d2k_call* call) {
  return {find(call->inputs, call->num_inputs, "q"),        find(call->inputs, call->num_inputs, "k"),
          find(call->inputs, call->num_inputs, "v"),        find(call->inputs, call->num_inputs, "cu_seqlens"),
          find(call->outputs, call->num_outputs, "o"), find(call->outputs, call->num_outputs, "lse")};
}

}  // namespace

extern "C" int d2k_workspace_size(const d2k_call* call, size_t* bytes) {
  const Tensors t = tensors_of(call);
  if (const char* problem = unsupported(t)) return failed(call, problem);
  *bytes = layout_for(t.q->shape[0], t.cu->shape[0] - 1).bytes;
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  const Tensors t = tensors_of(call);
  if (const char* problem = unsupported(t)) return failed(call, problem);
  const d2k_scalar* scale = nullptr;
  for (int32_t i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, "softmax_scale") == 0) scale = &call->scalars[i];
  if (!scale || !(scale->f > 0.0) || !std::isfinite(scale->f)) return failed(call, "needs a positive, finite scalar 'softmax_scale'");
  const int64_t tokens = t.q->shape[0], batch = t.cu->shape[0] - 1;
  const Layout layout = layout_for(tokens, batch);
  if (!call->workspace || call->workspace_bytes < layout.bytes) return failed(call, "the workspace is smaller than asked");
  if (tokens == 0) return 0;

  auto* base = static_cast<unsigned char*>(call->workspace);
  const int bound = static_cast<int>((tokens + prefill::kBlockM - 1) / prefill::kBlockM + batch);
  const ScheduleView view{reinterpret_cast<int*>(base + layout.count), reinterpret_cast<TileWork*>(base + layout.order),
                          reinterpret_cast<TileWork*>(base + layout.listing), reinterpret_cast<int*>(base + layout.cost),
                          reinterpret_cast<int*>(base + layout.first_tile), bound};
  using prefill::Element;
  auto gmem = [](const d2k_tensor* x) {
    return cute::make_tensor(cute::make_gmem_ptr(static_cast<const Element*>(x->data)),
                             cute::make_shape(static_cast<int32_t>(x->shape[0]), static_cast<int32_t>(x->shape[2]),
                                              static_cast<int32_t>(x->shape[1])),
                             cute::make_stride(x->strides[0], cute::_1{}, x->strides[1]));
  };
  const auto q = gmem(t.q), k = gmem(t.k), v = gmem(t.v);
  Params params{
      cute::make_tma_copy(cute::SM90_TMA_LOAD{}, q, prefill::SmemLayoutQ{},
                          cute::Shape<cute::Int<prefill::kBlockM>, cute::Int<prefill::kHeadDim>>{}, cute::_1{}),
      cute::make_tma_copy(cute::SM90_TMA_LOAD{}, k, cute::take<0, 2>(prefill::SmemLayoutKV{}),
                          cute::Shape<cute::Int<prefill::kBlockN>, cute::Int<prefill::kHeadDim>>{}, cute::_1{}),
      cute::make_tma_copy(cute::SM90_TMA_LOAD{}, v, cute::take<0, 2>(prefill::SmemLayoutKV{}),
                          cute::Shape<cute::Int<prefill::kBlockN>, cute::Int<prefill::kHeadDim>>{}, cute::_1{}),
      q.shape(),
      k.shape(),
      static_cast<Element*>(t.o->data),
      static_cast<float*>(t.lse->data),
      static_cast<const int*>(t.cu->data),
      t.o->strides[0],
      t.o->strides[1],
      t.lse->strides[0],
      t.lse->strides[1],
      static_cast<int>(t.q->shape[1]),
      static_cast<int>(t.q->shape[1] / t.k->shape[1]),
      static_cast<float>(scale->f * 1.4426950408889634)};

  // Every host-side query and check first, so that the two launches go back to back.
  const int64_t items = int64_t{bound} * params.heads;
  if (items >= (int64_t{1} << 31)) return failed(call, "too many work items");
  int device = 0, sms = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error == cudaSuccess) error = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (error == cudaSuccess)
    error = cudaFuncSetAttribute(prefill_attention, cudaFuncAttributeMaxDynamicSharedMemorySize, prefill::kSharedBytes);
  if (error != cudaSuccess) return failed(call, cudaGetErrorString(error));
  const int64_t blocks = std::min<int64_t>(items, sms);
  const auto stream = static_cast<cudaStream_t>(call->stream);
  prefill::schedule_tiles<prefill::kBlockM, prefill::kBlockN>
      <<<1, prefill::kScheduleThreads, 0, stream>>>(static_cast<const int*>(t.cu->data), static_cast<int>(batch), view);
  prefill_attention<<<static_cast<unsigned>(blocks), prefill::kThreads, prefill::kSharedBytes, stream>>>(params, view.count, view.order);
  error = cudaGetLastError();
  if (error != cudaSuccess) return failed(call, cudaGetErrorString(error));
  return 0;
}
