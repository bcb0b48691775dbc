// Plain host solution of attn/decode_paged_gqa for the cpu device: per sequence and query head, the context's
// pages in block-table order, one page of 16 keys at a time with an online softmax (a running maximum and
// sum, the partial output rescaled when the maximum grows), all in fp32; the last page stops at seq_len.
// o rounded once to bf16, lse = max + log(sum) in the natural log.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "d2k/solution.h"

namespace {

constexpr int64_t kPage = 16;

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
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "decode_paged_gqa (cpu): %s", message);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

const uint16_t* bits(const d2k_tensor& x) { return static_cast<const uint16_t*>(x.data); }

// Row (page, token, head) of a [NB, 16, Hkv, D] cache: its D values start here.
const uint16_t* cache_row(const d2k_tensor& cache, int64_t page, int64_t token, int64_t head) {
  return bits(cache) + page * cache.strides[0] + token * cache.strides[1] + head * cache.strides[2];
}

struct Call {
  const d2k_tensor *q, *k_cache, *v_cache, *block_table, *seq_lens, *o, *lse;
  float scale;
};

// Sequence b, query head h (KV head h / G): o[b, h, :] and lse[h, b].
void attend(const Call& c, int64_t b, int64_t h, int64_t kv, std::vector<float>& acc) {
  const int64_t dim = c.q->shape[2];
  const auto* table = static_cast<const int32_t*>(c.block_table->data) + b * c.block_table->strides[0];
  const int64_t length = static_cast<const int32_t*>(c.seq_lens->data)[b * c.seq_lens->strides[0]];
  std::vector<float> query(dim), scores(kPage);
  for (int64_t d = 0; d < dim; ++d) query[d] = bf16_to_float(bits(*c.q)[b * c.q->strides[0] + h * c.q->strides[1] + d]);
  std::fill(acc.begin(), acc.end(), 0.0f);
  float running_max = -std::numeric_limits<float>::infinity(), sum = 0.0f;
  for (int64_t first = 0; first < length; first += kPage) {
    const int64_t page = table[(first / kPage) * c.block_table->strides[1]];
    const int64_t count = std::min(kPage, length - first);  // the last page may be partial
    float page_max = -std::numeric_limits<float>::infinity();
    for (int64_t t = 0; t < count; ++t) {
      const uint16_t* key = cache_row(*c.k_cache, page, t, kv);
      float dot = 0.0f;
      for (int64_t d = 0; d < dim; ++d) dot += query[d] * bf16_to_float(key[d]);
      scores[t] = dot * c.scale;
      page_max = std::max(page_max, scores[t]);
    }
    const float new_max = std::max(running_max, page_max);
    const float rescale = std::exp(running_max - new_max);  // 0 on the first page
    sum *= rescale;
    for (float& a : acc) a *= rescale;
    for (int64_t t = 0; t < count; ++t) {
      const float p = std::exp(scores[t] - new_max);
      sum += p;
      const uint16_t* value = cache_row(*c.v_cache, page, t, kv);
      for (int64_t d = 0; d < dim; ++d) acc[d] += p * bf16_to_float(value[d]);
    }
    running_max = new_max;
  }
  auto* out = static_cast<uint16_t*>(c.o->data) + b * c.o->strides[0] + h * c.o->strides[1];
  for (int64_t d = 0; d < dim; ++d) out[d] = float_to_bf16(acc[d] / sum);
  static_cast<float*>(c.lse->data)[h * c.lse->strides[0] + b * c.lse->strides[1]] = running_max + std::log(sum);
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const auto in = [&](const char* name) { return find(call->inputs, call->num_inputs, name); };
  const auto out = [&](const char* name) { return find(call->outputs, call->num_outputs, name); };
  Call c{in("q"), in("k_cache"), in("v_cache"), in("block_table"), in("seq_lens"), out("o"), out("lse"), 0.0f};
  if (!c.q || !c.k_cache || !c.v_cache || !c.block_table || !c.seq_lens || !c.o || !c.lse)
    return failed(call, "missing one of q, k_cache, v_cache, block_table, seq_lens, o, lse");
  if (c.q->rank != 3 || c.o->rank != 3 || c.k_cache->rank != 4 || c.v_cache->rank != 4 || c.block_table->rank != 2 ||
      c.seq_lens->rank != 1 || c.lse->rank != 2)
    return failed(call, "expects q, o [B, Hq, D], caches [NB, 16, Hkv, D], block_table [B, MB], seq_lens [B], lse [Hq, B]");
  for (const d2k_tensor* x : {c.q, c.o, c.k_cache, c.v_cache})
    if (x->dtype != D2K_BFLOAT16 || x->strides[x->rank - 1] != 1) return failed(call, "q, o and the caches must be bf16 with a contiguous head dim");
  if (c.block_table->dtype != D2K_INT32 || c.seq_lens->dtype != D2K_INT32 || c.lse->dtype != D2K_FLOAT32)
    return failed(call, "expects int32 block_table and seq_lens, fp32 lse");
  if (c.k_cache->shape[1] != kPage) return failed(call, "the page size (k_cache's dim 1) must be 16");
  const int64_t heads = c.q->shape[1], kv_heads = c.k_cache->shape[2];
  if (kv_heads < 1 || heads % kv_heads != 0) return failed(call, "Hq is not a multiple of Hkv");
  bool found = false;
  for (int32_t i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, "softmax_scale") == 0) c.scale = static_cast<float>(call->scalars[i].f), found = true;
  if (!found) return failed(call, "missing the scalar 'softmax_scale'");

  std::vector<float> acc(c.q->shape[2]);
  const int64_t group = heads / kv_heads;
  for (int64_t b = 0; b < c.q->shape[0]; ++b)
    for (int64_t h = 0; h < heads; ++h) attend(c, b, h, h / group, acc);
  return 0;
}
