// Expert CUDA solution of attn/decode_paged_gqa for the H200 (sm_90a): split-KV paged decode on mma.sync.
//
// split_attention (split_kernel.cuh) runs one CTA per (sequence, KV head, range of split_pages pages): the
// KV head's G query heads share every K/V byte it streams, and the split count (plan.cuh) gives about two
// waves of CTAs whatever B Hkv is. A sequence whose pages fit one range writes o and lse itself; the others
// leave normalized partial outputs and base-2 LSEs in the workspace for merge_splits (merge_kernel.cuh),
// launched only when the plan splits at all. The plan depends on the shapes and the SM count, never on the
// lengths, so nothing returns to the host.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"
#include "merge_kernel.cuh"
#include "plan.cuh"
#include "split_kernel.cuh"

namespace {

int failed(const d2k_call* call, const char* what) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "decode_paged_gqa (cuda): %s", what);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

struct Tensors {
  const d2k_tensor *q, *k_cache, *v_cache, *block_table, *seq_lens, *o, *lse;
};

Tensors tensors_of(const d2k_call* call) {
  const auto in = [&](const char* name) { return find(call->inputs, call->num_inputs, name); };
  const auto out = [&](const char* name) { return find(call->outputs, call->num_outputs, name); };
  return {in("q"), in("k_cache"), in("v_cache"), in("block_table"), in("seq_lens"), out("o"), out("lse")};
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Rows of 128 bf16 loaded as 16-byte chunks: a contiguous head dim, 16-byte aligned rows.
bool chunked_rows(const d2k_tensor& x) {
  if (x.strides[x.rank - 1] != 1 || !aligned16(x.data)) return false;
  for (int32_t i = 0; i + 1 < x.rank; ++i)
    if (x.strides[i] % 8 != 0) return false;
  return true;
}

// Everything the kernels assume, checked: a message naming what is off, or nullptr.
const char* unsupported(const Tensors& t) {
  if (!t.q || !t.k_cache || !t.v_cache || !t.block_table || !t.seq_lens || !t.o || !t.lse)
    return "missing one of q, k_cache, v_cache, block_table, seq_lens, o, lse";
  if (t.q->rank != 3 || t.o->rank != 3 || t.q->dtype != D2K_BFLOAT16 || t.o->dtype != D2K_BFLOAT16)
    return "q and o must be [B, Hq, 128] bf16";
  for (const d2k_tensor* cache : {t.k_cache, t.v_cache})
    if (cache->rank != 4 || cache->dtype != D2K_BFLOAT16 || cache->shape[1] != decode::kPage || cache->shape[3] != decode::kHeadDim)
      return "k_cache and v_cache must be [NB, 16, Hkv, 128] bf16";
  if (t.q->shape[2] != decode::kHeadDim || t.o->shape[2] != decode::kHeadDim) return "the head dim must be 128";
  for (const d2k_tensor* x : {t.q, t.o, t.k_cache, t.v_cache})
    if (!chunked_rows(*x)) return "q, o and the caches need a contiguous head dim and 16-byte aligned rows";
  if (t.block_table->rank != 2 || t.block_table->dtype != D2K_INT32) return "block_table must be [B, MB] int32";
  if (t.seq_lens->rank != 1 || t.seq_lens->dtype != D2K_INT32) return "seq_lens must be [B] int32";
  if (t.lse->rank != 2 || t.lse->dtype != D2K_FLOAT32) return "lse must be [Hq, B] fp32";
  const int64_t batch = t.q->shape[0], heads = t.q->shape[1], kv_heads = t.k_cache->shape[2];
  if (t.block_table->shape[0] != batch || t.seq_lens->shape[0] != batch || t.o->shape[0] != batch || t.lse->shape[1] != batch)
    return "q, o, block_table, seq_lens and lse must agree on B";
  if (kv_heads < 1 || t.v_cache->shape[2] != kv_heads || heads % kv_heads != 0) return "Hq must be a multiple of Hkv (both caches)";
  if (heads / kv_heads > decode::kRows) return "at most 16 query heads per KV head (the rows of one mma tile)";
  if (batch * kv_heads >= (int64_t{1} << 31) || batch * heads >= (int64_t{1} << 31)) return "B Hq must fit in 31 bits";
  if (t.block_table->shape[1] * decode::kPage >= (int64_t{1} << 31)) return "16 MB must fit in 31 bits";
  return nullptr;
}

int sm_count() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return 0;
  return sms;
}

decode::SplitPlan plan_for(const Tensors& t, int sms) {
  return decode::plan_splits(t.q->shape[0], t.k_cache->shape[2], t.block_table->shape[1], sms);
}

}  // namespace

extern "C" int d2k_workspace_size(const d2k_call* call, size_t* bytes) {
  const Tensors t = tensors_of(call);
  if (const char* problem = unsupported(t)) return failed(call, problem);
  const int sms = sm_count();
  if (sms < 1) return failed(call, "cannot read the device's SM count");
  *bytes = decode::partial_bytes(t.q->shape[0], t.q->shape[1], plan_for(t, sms));
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
  const decode::SplitPlan plan = plan_for(t, sms);
  const size_t partials = decode::partial_bytes(batch, heads, plan);
  if (partials > 0 && (!call->workspace || call->workspace_bytes < partials)) return failed(call, "the workspace is smaller than asked");

  decode::Params p{};
  p.q = static_cast<const __nv_bfloat16*>(t.q->data);
  p.k_cache = static_cast<const __nv_bfloat16*>(t.k_cache->data);
  p.v_cache = static_cast<const __nv_bfloat16*>(t.v_cache->data);
  p.block_table = static_cast<const int*>(t.block_table->data);
  p.seq_lens = static_cast<const int*>(t.seq_lens->data);
  p.o = static_cast<__nv_bfloat16*>(t.o->data);
  p.lse = static_cast<float*>(t.lse->data);
  const int64_t partial_rows = batch * heads * plan.splits;
  p.partial_o = partials > 0 ? static_cast<float*>(call->workspace) : nullptr;
  p.partial_lse = partials > 0 ? p.partial_o + partial_rows * decode::kHeadDim : nullptr;
  p.q_seq = t.q->strides[0], p.q_head = t.q->strides[1];
  p.k_page = t.k_cache->strides[0], p.k_token = t.k_cache->strides[1], p.k_head = t.k_cache->strides[2];
  p.v_page = t.v_cache->strides[0], p.v_token = t.v_cache->strides[1], p.v_head = t.v_cache->strides[2];
  p.table_seq = t.block_table->strides[0], p.table_page = t.block_table->strides[1];
  p.seq_lens_stride = t.seq_lens->strides[0];
  p.o_seq = t.o->strides[0], p.o_head = t.o->strides[1];
  p.lse_head = t.lse->strides[0], p.lse_seq = t.lse->strides[1];
  p.heads = static_cast<int>(heads);
  p.kv_heads = static_cast<int>(t.k_cache->shape[2]);
  p.group = p.heads / p.kv_heads;
  p.splits = plan.splits;
  p.split_pages = plan.split_pages;
  p.scale_log2 = static_cast<float>(scale->f * 1.4426950408889634);

  const auto stream = static_cast<cudaStream_t>(call->stream);
  cudaError_t error = cudaFuncSetAttribute(decode::split_attention, cudaFuncAttributeMaxDynamicSharedMemorySize, decode::kSharedBytes);
  if (error != cudaSuccess) return failed(call, cudaGetErrorString(error));
  if (plan.splits > 65535) return failed(call, "more than 65535 splits");
  const dim3 grid(static_cast<unsigned>(batch * p.kv_heads), static_cast<unsigned>(plan.splits));
  decode::split_attention<<<grid, decode::kThreads, decode::kSharedBytes, stream>>>(p);
  if (plan.splits > 1) decode::merge_splits<<<static_cast<unsigned>(batch * heads), decode::kHeadDim, 0, stream>>>(p);
  error = cudaGetLastError();
  if (error != cudaSuccess) return failed(call, cudaGetErrorString(error));
  return 0;
}
