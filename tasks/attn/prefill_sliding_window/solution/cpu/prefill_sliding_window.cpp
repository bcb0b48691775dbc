// Plain host solution of attn/prefill_sliding_window for the cpu device: per sequence, query head and query,
// the keys of its band [max(first, query - W), query] in blocks of kBlock with an online softmax (a running
// maximum and sum, the partial output rescaled when the maximum grows), all in fp32; o rounded once to bf16,
// lse = max + log(sum). Any head dim (the task has 128 and 64).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "d2k/solution.h"

namespace {

constexpr int64_t kBlock = 64;  // keys per block of the online softmax

float bf16_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// Round to nearest, ties to even; NaN stays a (quiet) NaN.
uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

int failed(const d2k_call* call, const char* message) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "prefill_sliding_window (cpu): %s", message);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

// Element (t, h, d) of a [T, H, D] bf16 tensor, as fp32.
float at(const d2k_tensor& x, int64_t t, int64_t h, int64_t d) {
  return bf16_to_float(static_cast<const uint16_t*>(x.data)[t * x.strides[0] + h * x.strides[1] + d * x.strides[2]]);
}

// One query row: query token `query` of the sequence starting at `first`, head h reading KV head kv, keys
// at most `window` before it.
void attend_row(const d2k_tensor& q, const d2k_tensor& k, const d2k_tensor& v, const d2k_tensor& o, float* lse_row,
                int64_t first, int64_t query, int64_t h, int64_t kv, float scale, int64_t window) {
  const int64_t dim = q.shape[2];
  std::vector<float> qrow(dim), acc(dim, 0.0f), scores(kBlock);
  for (int64_t d = 0; d < dim; ++d) qrow[d] = at(q, query, h, d);
  float running_max = -std::numeric_limits<float>::infinity(), sum = 0.0f;
  // Keys max(first, query - W) .. query: the band, inside this sequence.
  for (int64_t block = std::max(first, query - window); block <= query; block += kBlock) {
    const int64_t count = std::min(kBlock, query + 1 - block);
    float block_max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < count; ++j) {
      float dot = 0.0f;
      for (int64_t d = 0; d < dim; ++d) dot += qrow[d] * at(k, block + j, kv, d);
      scores[j] = dot * scale;
      block_max = std::max(block_max, scores[j]);
    }
    const float new_max = std::max(running_max, block_max);
    const float rescale = std::exp(running_max - new_max);  // 0 on the first block
    sum *= rescale;
    for (int64_t d = 0; d < dim; ++d) acc[d] *= rescale;
    for (int64_t j = 0; j < count; ++j) {
      const float p = std::exp(scores[j] - new_max);
      sum += p;
      for (int64_t d = 0; d < dim; ++d) acc[d] += p * at(v, block + j, kv, d);
    }
    running_max = new_max;
  }
  auto* out = static_cast<uint16_t*>(o.data);
  for (int64_t d = 0; d < dim; ++d) out[query * o.strides[0] + h * o.strides[1] + d * o.strides[2]] = float_to_bf16(acc[d] / sum);
  *lse_row = running_max + std::log(sum);
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* q = find(call->inputs, call->num_inputs, "q");
  const d2k_tensor* k = find(call->inputs, call->num_inputs, "k");
  const d2k_tensor* v = find(call->inputs, call->num_inputs, "v");
  const d2k_tensor* cu = find(call->inputs, call->num_inputs, "cu_seqlens");
  const d2k_tensor* o = find(call->outputs, call->num_outputs, "o");
  const d2k_tensor* lse = find(call->outputs, call->num_outputs, "lse");
  if (!q || !k || !v || !cu || !o || !lse) return failed(call, "missing one of q, k, v, cu_seqlens, o, lse");
  if (q->rank != 3 || k->rank != 3 || v->rank != 3 || o->rank != 3 || lse->rank != 2 || cu->rank != 1)
    return failed(call, "expects q, k, v, o [T, H, D], lse [Hq, T], cu_seqlens [B + 1]");
  if (q->dtype != D2K_BFLOAT16 || k->dtype != D2K_BFLOAT16 || v->dtype != D2K_BFLOAT16 || o->dtype != D2K_BFLOAT16 ||
      lse->dtype != D2K_FLOAT32 || cu->dtype != D2K_INT32)
    return failed(call, "expects bf16 q, k, v, o, fp32 lse and int32 cu_seqlens");
  const int64_t heads = q->shape[1], kv_heads = k->shape[1];
  if (kv_heads < 1 || heads % kv_heads != 0) return failed(call, "Hq is not a multiple of Hkv");
  double scale = 0.0;
  int64_t window = -1;
  for (int32_t i = 0; i < call->num_scalars; ++i) {
    if (std::strcmp(call->scalars[i].name, "softmax_scale") == 0) scale = call->scalars[i].f;
    if (std::strcmp(call->scalars[i].name, "window_left") == 0) window = call->scalars[i].i;
  }
  if (!(scale > 0.0)) return failed(call, "needs a positive scalar 'softmax_scale'");
  if (window < 0) return failed(call, "needs a scalar 'window_left' >= 0");

  const auto* offsets = static_cast<const int32_t*>(cu->data);
  auto* lse_data = static_cast<float*>(lse->data);
  const int64_t group = heads / kv_heads;
  for (int64_t b = 0; b + 1 < cu->shape[0]; ++b) {
    const int64_t first = offsets[b * cu->strides[0]], end = offsets[(b + 1) * cu->strides[0]];
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t query = first; query < end; ++query)
        attend_row(*q, *k, *v, *o, lse_data + h * lse->strides[0] + query * lse->strides[1], first, query, h, h / group,
                   static_cast<float>(scale), window);
  }
  return 0;
}
