// Expert CUDA solution of attn/prefill_sliding_window for the H200 (sm_90a), second version: attn/
// prefill_causal_gqa's Hopper tile loop (TMA, wgmma, a producer warpgroup and two consumers) made to walk
// only the band's key tiles (hopper_band.cuh, band.cuh), behind the longest-first tile schedule
// (schedule.cuh), for head dims 128 and 64.
//
// Two launches on the call's stream: schedule_tiles (one CTA) reads cu_seqlens on the device and writes the
// sorted list of (sequence, query tile) into the workspace; band_attention<D> runs one CTA per listed tile
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
#include "hopper_band.cuh"
#include "schedule.cuh"

namespace {

using sliding::Params;
using sliding::ScheduleView;
using sliding::TileWork;

// D 128: one CTA per SM (160 KB of shared memory); D 64: two (80 KB each). Warpgroup 0 loads, warpgroups 1
// and 2 compute.
template <int HeadDim>
__global__ void __launch_bounds__(sliding::kThreads, sliding::Config<HeadDim>::kMinBlocks)
    band_attention(const __grid_constant__ Params<HeadDim> params, const int* __restrict__ tile_count,
                   const TileWork* __restrict__ order) {
  using C = sliding::Config<HeadDim>;
  using Storage = typename sliding::Traits<HeadDim>::SharedStorage;
  extern __shared__ unsigned char shared[];
  auto& smem = *reinterpret_cast<Storage*>((reinterpret_cast<uintptr_t>(shared) + 1023) & ~uintptr_t{1023});
  const int entry = static_cast<int>(blockIdx.x) / params.heads;
  if (entry >= *tile_count) return;
  const TileWork work = order[entry];
  const int head = static_cast<int>(blockIdx.x) % params.heads;
  const int seq_start = params.cu_seqlens[work.seq];
  const int length = params.cu_seqlens[work.seq + 1] - seq_start;
  const sliding::KeyRange range{sliding::first_key_tile(work.q_tile, params.window, sliding::kBlockM, C::kBlockN),
                                sliding::end_key_tile(work.q_tile, length, sliding::kBlockM, C::kBlockN) - 1};
  if (threadIdx.x == 0) {
    using Barrier = cutlass::arch::ClusterBarrier;
    Barrier::init(&smem.q_full, 1);
    for (int s = 0; s < C::kStages; ++s) {
      Barrier::init(&smem.k_full[s], 1);
      Barrier::init(&smem.v_full[s], 1);
      Barrier::init(&smem.k_empty[s], sliding::kConsumers);
      Barrier::init(&smem.v_empty[s], sliding::kConsumers);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x < 128) {
    cutlass::arch::warpgroup_reg_dealloc<C::kProducerRegisters>();
    if (threadIdx.x == 0) sliding::producer(params, smem, work, head, seq_start, range);
  } else {
    cutlass::arch::warpgroup_reg_alloc<C::kConsumerRegisters>();
    sliding::consumer(params, smem, work, head, seq_start, length, range, static_cast<int>(threadIdx.x) - 128);
  }
}

int failed(const d2k_call* call, const char* what) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "prefill_sliding_window (cuda): %s", what);
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
  const int64_t bound = (tokens + sliding::kBlockM - 1) / sliding::kBlockM + batch;
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
  const int64_t dim = t.q->shape[2];
  if (dim != 128 && dim != 64) return "the head dim must be 128 or 64";
  for (const d2k_tensor* x : {t.q, t.k, t.v, t.o}) {
    if (x->shape[2] != dim) return "q, k, v and o must have the same head dim";
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

// One head dim's launches: the schedule (its costs count this head dim's key tiles), the TMA descriptors of
// q, k and v, the band kernel's shared memory, then the grid over listed tiles x heads.
template <int HeadDim>
cudaError_t launch(const Tensors& t, float scale_log2, int window, const ScheduleView& view, int64_t blocks,
                   cudaStream_t stream) {
  using T = sliding::Traits<HeadDim>;
  using sliding::Element;
  auto gmem = [](const d2k_tensor* x) {
    return cute::make_tensor(cute::make_gmem_ptr(static_cast<const Element*>(x->data)),
                             cute::make_shape(static_cast<int32_t>(x->shape[0]), static_cast<int32_t>(x->shape[2]),
                                              static_cast<int32_t>(x->shape[1])),
                             cute::make_stride(x->strides[0], cute::_1{}, x->strides[1]));
  };
  const auto q = gmem(t.q), k = gmem(t.k), v = gmem(t.v);
  const Params<HeadDim> params{T::make_tma_q(q),
                               T::make_tma_kv(k),
                               T::make_tma_kv(v),
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
                               window,
                               scale_log2};
  sliding::schedule_tiles<sliding::kBlockM, T::kBlockN><<<1, sliding::kScheduleThreads, 0, stream>>>(
      params.cu_seqlens, static_cast<int>(t.cu->shape[0] - 1), window, view);
  cudaError_t error =
      cudaFuncSetAttribute(band_attention<HeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSharedBytes);
  if (error != cudaSuccess) return error;
  // All of the SM's unified L1 as shared memory: a carveout the driver might pick for one CTA's 82 KB at D 64
  // would leave room for only one of the two, and the kernel reads nothing through L1 that matters.
  error = cudaFuncSetAttribute(band_attention<HeadDim>, cudaFuncAttributePreferredSharedMemoryCarveout,
                               cudaSharedmemCarveoutMaxShared);
  if (error != cudaSuccess) return error;
  band_attention<HeadDim><<<static_cast<unsigned>(blocks), sliding::kThreads, T::kSharedBytes, stream>>>(
      params, view.count, view.order);
  return cudaGetLastError();
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
  const d2k_scalar *scale = nullptr, *window = nullptr;
  for (int32_t i = 0; i < call->num_scalars; ++i) {
    if (std::strcmp(call->scalars[i].name, "softmax_scale") == 0) scale = &call->scalars[i];
    if (std::strcmp(call->scalars[i].name, "window_left") == 0) window = &call->scalars[i];
  }
  if (!scale || !(scale->f > 0.0) || !std::isfinite(scale->f)) return failed(call, "needs a positive, finite scalar 'softmax_scale'");
  if (!window || window->i < 0) return failed(call, "needs an integer scalar 'window_left' >= 0");
  const int64_t tokens = t.q->shape[0], batch = t.cu->shape[0] - 1;
  const Layout layout = layout_for(tokens, batch);
  if (!call->workspace || call->workspace_bytes < layout.bytes) return failed(call, "the workspace is smaller than asked");
  if (tokens == 0) return 0;

  auto* base = static_cast<unsigned char*>(call->workspace);
  const int bound = static_cast<int>((tokens + sliding::kBlockM - 1) / sliding::kBlockM + batch);
  const ScheduleView view{reinterpret_cast<int*>(base + layout.count), reinterpret_cast<TileWork*>(base + layout.order),
                          reinterpret_cast<TileWork*>(base + layout.listing), reinterpret_cast<int*>(base + layout.cost),
                          reinterpret_cast<int*>(base + layout.first_tile), bound};
  // A window of T or more keys is no window at all (no sequence is longer than T): clamped, the band's
  // arithmetic stays far from int overflow.
  const int clamped_window = static_cast<int>(std::min<int64_t>(window->i, tokens));
  const float scale_log2 = static_cast<float>(scale->f * 1.4426950408889634);
  const int64_t blocks = int64_t{bound} * t.q->shape[1];
  if (blocks >= (int64_t{1} << 31)) return failed(call, "too many query tiles for one grid");
  const auto stream = static_cast<cudaStream_t>(call->stream);
  const cudaError_t error = t.q->shape[2] == 128 ? launch<128>(t, scale_log2, clamped_window, view, blocks, stream)
                                                 : launch<64>(t, scale_log2, clamped_window, view, blocks, stream);
  if (error != cudaSuccess) return failed(call, cudaGetErrorString(error));
  return 0;
}
