// Expert CUDA solution of attn/decode_mla for the H200 (sm_90a), second version: split-KV MLA decode on
// wgmma and TMA.
//
// attend (hopper_decode.cuh) runs one CTA per (sequence, head block, range of split_pages pages): a producer
// warpgroup copies the head block's queries once and the range's pages (72 KB each) through a two-stage
// ring with TMA; two consumer warpgroups compute S = Q K^T (576 columns) and O = P V (the first 512, 256
// each) with wgmma from the same shared-memory copy of each page. With 128 heads the two 64-head blocks of a
// sequence are a cluster of two CTAs that multicast each page to both. The split count (plan.cuh) fills
// whole waves of one CTA per SM. A sequence whose pages fit one range writes o and lse itself; the others
// leave normalized partial outputs and base-2 LSEs in the workspace for merge_splits (merge_kernel.cuh),
// launched only when the plan splits at all. The plan depends on the shapes and the device, never on the
// lengths, so nothing returns to the host.
//
// With 16 heads (tensor parallel 8, memory-bound) the third version's path runs instead (small_heads.cuh):
// one persistent CTA per SM, the batch's pages cut into equal ranges on the device, a ring of 23 slots of
// 8 KB, the heads as the wgmma N (no padding to 64 rows), merge_pieces for the sequences the ranges cut.
// Every other head count runs the paths above unchanged.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"
#include "hopper_decode.cuh"
#include "merge_kernel.cuh"
#include "plan.cuh"
#include "small_heads.cuh"

namespace {

int failed(const d2k_call* call, const char* what) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "decode_mla (cuda): %s", what);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

struct Tensors {
  const d2k_tensor *q, *cache, *block_table, *seq_lens, *o, *lse;
};

Tensors tensors_of(const d2k_call* call) {
  const auto in = [&](const char* name) { return find(call->inputs, call->num_inputs, name); };
  const auto out = [&](const char* name) { return find(call->outputs, call->num_outputs, name); };
  return {in("q"), in("kv_cache"), in("block_table"), in("seq_lens"), out("o"), out("lse")};
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Rows copied or stored in 16-byte chunks: a contiguous last dimension, 16-byte aligned rows.
bool chunked_rows(const d2k_tensor& x) {
  if (x.strides[x.rank - 1] != 1 || !aligned16(x.data)) return false;
  for (int32_t i = 0; i + 1 < x.rank; ++i)
    if (x.strides[i] % 8 != 0) return false;
  return true;
}

// The kernel configuration for H heads: pairs of 64-head blocks sharing pages (H a multiple of 128), one
// 64-head block (a multiple of 64), or blocks of 16 heads.
enum class Kind { kPairs64, kBlocks64, kBlocks16 };
Kind kind_of(int64_t heads) { return heads % 128 == 0 ? Kind::kPairs64 : heads % 64 == 0 ? Kind::kBlocks64 : Kind::kBlocks16; }
int block_rows(int64_t heads) { return kind_of(heads) == Kind::kBlocks16 ? 16 : 64; }

constexpr int64_t kInt32Max = (int64_t{1} << 31) - 1;

// Everything the kernels assume, checked: a message naming what is off, or nullptr.
const char* unsupported(const Tensors& t) {
  if (!t.q || !t.cache || !t.block_table || !t.seq_lens || !t.o || !t.lse)
    return "missing one of q, kv_cache, block_table, seq_lens, o, lse";
  if (t.q->rank != 3 || t.q->dtype != D2K_BFLOAT16 || t.q->shape[2] != mla::kWidth) return "q must be [B, H, 576] bf16";
  if (t.o->rank != 3 || t.o->dtype != D2K_BFLOAT16 || t.o->shape[2] != mla::kValues) return "o must be [B, H, 512] bf16";
  if (t.cache->rank != 3 || t.cache->dtype != D2K_BFLOAT16 || t.cache->shape[1] != mla::kPage || t.cache->shape[2] != mla::kWidth)
    return "kv_cache must be [NB, 64, 576] bf16";
  for (const d2k_tensor* x : {t.q, t.o, t.cache})
    if (!chunked_rows(*x)) return "q, o and kv_cache need a contiguous last dimension and 16-byte aligned rows";
  if (t.block_table->rank != 2 || t.block_table->dtype != D2K_INT32) return "block_table must be [B, MB] int32";
  if (t.seq_lens->rank != 1 || t.seq_lens->dtype != D2K_INT32) return "seq_lens must be [B] int32";
  if (t.lse->rank != 2 || t.lse->dtype != D2K_FLOAT32) return "lse must be [B, H] fp32";
  const int64_t batch = t.q->shape[0], heads = t.q->shape[1];
  if (t.block_table->shape[0] != batch || t.seq_lens->shape[0] != batch || t.o->shape[0] != batch || t.lse->shape[0] != batch)
    return "q, o, block_table, seq_lens and lse must agree on B";
  if (t.o->shape[1] != heads || t.lse->shape[1] != heads) return "q, o and lse must agree on H";
  if (heads < 16 || heads % 16 != 0) return "H must be a multiple of 16";
  if (batch * heads >= (int64_t{1} << 31) / mla::kValues) return "B H 512 must fit in 31 bits";
  if (t.block_table->shape[1] * mla::kPage >= (int64_t{1} << 31)) return "64 MB must fit in 31 bits";
  if (t.cache->shape[0] < 1 || t.cache->shape[0] > kInt32Max) return "kv_cache needs between 1 and 2^31 - 1 pages";
  return nullptr;
}

int sm_count() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return 0;
  return sms;
}

using Pairs64 = mla::Config<64, 2>;
using Blocks64 = mla::Config<64, 1>;
using Blocks16 = mla::Config<16, 1>;

template <class Cfg>
cudaLaunchConfig_t launch_config(dim3 grid, cudaStream_t stream, cudaLaunchAttribute* attribute) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(mla::kThreads);
  config.dynamicSmemBytes = mla::kSharedBytes;
  config.stream = stream;
  if (Cfg::kCluster > 1) {
    attribute->id = cudaLaunchAttributeClusterDimension;
    attribute->val.clusterDim.x = Cfg::kCluster;
    attribute->val.clusterDim.y = 1;
    attribute->val.clusterDim.z = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
  }
  return config;
}

// CTAs that run at once: one per SM, in whole clusters (as many as the device can hold at a time).
int cta_slots(Kind kind, int sms) {
  if (kind != Kind::kPairs64) return sms;
  int clusters = 0;
  if (cudaFuncSetAttribute(mla::attend<Pairs64>, cudaFuncAttributeMaxDynamicSharedMemorySize, mla::kSharedBytes) == cudaSuccess) {
    cudaLaunchAttribute attribute{};
    const cudaLaunchConfig_t config = launch_config<Pairs64>(dim3(Pairs64::kCluster), nullptr, &attribute);
    if (cudaOccupancyMaxActiveClusters(&clusters, mla::attend<Pairs64>, &config) != cudaSuccess) clusters = 0;
  }
  (void)cudaGetLastError();  // a refused query is not the call's error: fall back to the SM count
  if (clusters < 1) clusters = sms / Pairs64::kCluster;
  return std::max(1, clusters * Pairs64::kCluster);
}

mla::SplitPlan plan_for(const Tensors& t, int sms) {
  const int64_t heads = t.q->shape[1], rows = block_rows(heads);
  return mla::plan_splits(t.q->shape[0], heads / rows, rows, t.block_table->shape[1], cta_slots(kind_of(heads), sms));
}

// A [X, 576, Y] tensor as TMA sees it (see mla::GmemTensor).
mla::GmemTensor gmem_view(const d2k_tensor& x, int64_t rows_stride, int64_t outer_stride) {
  return cute::make_tensor(cute::make_gmem_ptr(static_cast<const mla::Element*>(x.data)),
                           cute::make_shape(static_cast<int32_t>(x.shape[1]), static_cast<int32_t>(mla::kWidth),
                                            static_cast<int32_t>(x.shape[0])),
                           cute::make_stride(rows_stride, cute::_1{}, outer_stride));
}

template <class Cfg>
cudaError_t launch_attend(const Tensors& t, const mla::Params& common, dim3 grid, cudaStream_t stream) {
  // q as (head, column, sequence); the cache as (token, column, page).
  const mla::GmemTensor q = gmem_view(*t.q, t.q->strides[1], t.q->strides[0]);
  const mla::GmemTensor cache = gmem_view(*t.cache, t.cache->strides[1], t.cache->strides[0]);
  using namespace cute;
  const typename Cfg::KernelParams params{
      make_tma_copy(SM90_TMA_LOAD{}, q, mla::SmemLayoutBox<Cfg::kRows>{}, Shape<Int<Cfg::kRows>, _64>{}, _1{}),
      make_tma_copy(typename Cfg::PageLoad{}, cache, mla::SmemLayoutBox<Cfg::kBoxRows>{}, Shape<Int<Cfg::kBoxRows>, _64>{}, _1{}),
      q.shape(), cache.shape(), common};
  cudaError_t error = cudaFuncSetAttribute(mla::attend<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize, mla::kSharedBytes);
  if (error != cudaSuccess) return error;
  cudaLaunchAttribute attribute{};
  const cudaLaunchConfig_t config = launch_config<Cfg>(grid, stream, &attribute);
  error = cudaLaunchKernelEx(&config, mla::attend<Cfg>, params);
  if (error != cudaSuccess) return error;
  return cudaGetLastError();
}

// The 16-head path: one persistent CTA per SM over equal ranges of the batch's pages, then merge_pieces.
bool small_heads(const Tensors& t) { return t.q->shape[1] == mla::small::kHeads; }

int run_small(const d2k_call* call, const Tensors& t, mla::Params p, int sms, cudaStream_t stream) {
  const int64_t batch = t.q->shape[0];
  if (batch * t.block_table->shape[1] >= (int64_t{1} << 31)) return failed(call, "B MB pages must fit in 31 bits");
  if (!call->workspace || call->workspace_bytes < mla::small::workspace_bytes(batch, sms) || !aligned16(call->workspace))
    return failed(call, "the workspace is smaller than asked or not 16-byte aligned");
  p.partial_o = static_cast<float*>(call->workspace);
  p.partial_lse = p.partial_o + mla::small::partial_floats(sms);
  mla::small::Split split{reinterpret_cast<int*>(p.partial_lse + mla::small::lse_floats(sms)), static_cast<int>(batch), sms};

  using Tiles = mla::small::Tiles;
  const mla::GmemTensor q = gmem_view(*t.q, t.q->strides[1], t.q->strides[0]);
  const mla::GmemTensor cache = gmem_view(*t.cache, t.cache->strides[1], t.cache->strides[0]);
  using namespace cute;
  const mla::small::KernelParams params{
      make_tma_copy(SM90_TMA_LOAD{}, q, mla::SmemLayoutBox<Tiles::kRows>{}, Shape<Int<Tiles::kRows>, _64>{}, _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, cache, mla::SmemLayoutBox<Tiles::kBoxRows>{}, Shape<Int<Tiles::kBoxRows>, _64>{}, _1{}),
      q.shape(), cache.shape(), p, split};
  cudaError_t error =
      cudaFuncSetAttribute(mla::small::attend_small, cudaFuncAttributeMaxDynamicSharedMemorySize, mla::small::kSharedBytes);
  if (error == cudaSuccess) {
    mla::small::attend_small<<<static_cast<unsigned>(sms), mla::small::kThreads, mla::small::kSharedBytes, stream>>>(params);
    mla::small::merge_pieces<<<static_cast<unsigned>(batch * mla::small::kHeads), mla::small::kMergeThreads, 0, stream>>>(p, split);
    error = cudaGetLastError();
  }
  if (error != cudaSuccess) return failed(call, cudaGetErrorString(error));
  return 0;
}

}  // namespace

extern "C" int d2k_workspace_size(const d2k_call* call, size_t* bytes) {
  const Tensors t = tensors_of(call);
  if (const char* problem = unsupported(t)) return failed(call, problem);
  const int sms = sm_count();
  if (sms < 1) return failed(call, "cannot read the device's SM count");
  *bytes = small_heads(t) ? mla::small::workspace_bytes(t.q->shape[0], sms)
                          : mla::partial_bytes(t.q->shape[0], t.q->shape[1], plan_for(t, sms));
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  const Tensors t = tensors_of(call);
  if (const char* problem = unsupported(t)) return failed(call, problem);
  const d2k_scalar* scale = nullptr;
  for (int32_t i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, "softmax_scale") == 0) scale = &call->scalars[i];
  if (!scale || !(scale->f > 0.0) || !std::isfinite(scale->f)) return failed(call, "needs a positive, finite scalar 'softmax_scale'");
  const int sms = sm_count();
  if (sms < 1) return failed(call, "cannot read the device's SM count");
  const int64_t batch = t.q->shape[0], heads = t.q->shape[1];
  if (batch == 0) return 0;
  if (small_heads(t)) {
    mla::Params p{};
    p.block_table = static_cast<const int*>(t.block_table->data);
    p.seq_lens = static_cast<const int*>(t.seq_lens->data);
    p.o = static_cast<__nv_bfloat16*>(t.o->data);
    p.lse = static_cast<float*>(t.lse->data);
    p.table_seq = t.block_table->strides[0], p.table_page = t.block_table->strides[1];
    p.seq_lens_stride = t.seq_lens->strides[0];
    p.o_seq = t.o->strides[0], p.o_head = t.o->strides[1];
    p.lse_seq = t.lse->strides[0], p.lse_head = t.lse->strides[1];
    p.heads = static_cast<int>(heads);
    p.rows = static_cast<int>(heads);
    p.head_blocks = 1;
    p.scale_log2 = static_cast<float>(scale->f * 1.4426950408889634);
    return run_small(call, t, p, sms, static_cast<cudaStream_t>(call->stream));
  }
  const mla::SplitPlan plan = plan_for(t, sms);
  const size_t partials = mla::partial_bytes(batch, heads, plan);
  if (partials > 0 && (!call->workspace || call->workspace_bytes < partials || !aligned16(call->workspace)))
    return failed(call, "the workspace is smaller than asked or not 16-byte aligned");

  mla::Params p{};
  p.block_table = static_cast<const int*>(t.block_table->data);
  p.seq_lens = static_cast<const int*>(t.seq_lens->data);
  p.o = static_cast<__nv_bfloat16*>(t.o->data);
  p.lse = static_cast<float*>(t.lse->data);
  const int64_t partial_rows = batch * heads * plan.splits;
  p.partial_o = partials > 0 ? static_cast<float*>(call->workspace) : nullptr;
  p.partial_lse = partials > 0 ? p.partial_o + partial_rows * mla::kValues : nullptr;
  p.table_seq = t.block_table->strides[0], p.table_page = t.block_table->strides[1];
  p.seq_lens_stride = t.seq_lens->strides[0];
  p.o_seq = t.o->strides[0], p.o_head = t.o->strides[1];
  p.lse_seq = t.lse->strides[0], p.lse_head = t.lse->strides[1];
  p.heads = static_cast<int>(heads);
  p.rows = block_rows(heads);
  p.head_blocks = static_cast<int>(heads / p.rows);
  p.splits = plan.splits;
  p.split_pages = plan.split_pages;
  p.scale_log2 = static_cast<float>(scale->f * 1.4426950408889634);

  if (plan.splits > 65535) return failed(call, "more than 65535 splits");
  const auto stream = static_cast<cudaStream_t>(call->stream);
  const dim3 grid(static_cast<unsigned>(batch * p.head_blocks), static_cast<unsigned>(plan.splits));
  cudaError_t error = cudaSuccess;
  switch (kind_of(heads)) {
    case Kind::kPairs64: error = launch_attend<Pairs64>(t, p, grid, stream); break;
    case Kind::kBlocks64: error = launch_attend<Blocks64>(t, p, grid, stream); break;
    case Kind::kBlocks16: error = launch_attend<Blocks16>(t, p, grid, stream); break;
  }
  if (error != cudaSuccess) return failed(call, cudaGetErrorString(error));
  if (plan.splits > 1) mla::merge_splits<<<static_cast<unsigned>(batch * heads), mla::kMergeThreads, 0, stream>>>(p);
  error = cudaGetLastError();
  if (error != cudaSuccess) return failed(call, cudaGetErrorString(error));
  return 0;
}
