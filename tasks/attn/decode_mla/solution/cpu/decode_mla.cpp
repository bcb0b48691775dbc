// Plain host solution of attn/decode_mla for the cpu device: per sequence and head, the context's pages in
// block-table order, one page of 64 rows at a time with an online softmax (a running maximum and sum, the
// partial output rescaled when the maximum grows), all in fp32. The score of a row is over its 576 columns;
// the value is the same row's first 512. The last page stops at seq_len. o rounded once to bf16,
// lse = max + log(sum) in the natural log, stored [B, H].
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "d2k/solution.h"

namespace {

constexpr int64_t kPage = 64;
constexpr int64_t kWidth = 576;   // the latent (512) then the rotary key columns (64)
constexpr int64_t kValues = 512;  // V: the first 512 columns of each row

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
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "decode_mla (cpu): %s", message);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

struct Call {
  const d2k_tensor *q, *cache, *block_table, *seq_lens, *o, *lse;
  float scale;
};

// Row (page, token) of the [NB, 64, 576] cache, its 576 values widened to fp32.
void cache_row(const d2k_tensor& cache, int64_t page, int64_t token, float* row) {
  const auto* bits = static_cast<const uint16_t*>(cache.data) + page * cache.strides[0] + token * cache.strides[1];
  for (int64_t d = 0; d < kWidth; ++d) row[d] = bf16_to_float(bits[d * cache.strides[2]]);
}

// Sequence b, every head: o[b, h, :] and lse[b, h]. Each cache row is widened once and used by all heads.
void attend(const Call& c, int64_t b) {
  const int64_t heads = c.q->shape[1];
  const auto* table = static_cast<const int32_t*>(c.block_table->data) + b * c.block_table->strides[0];
  const int64_t length = static_cast<const int32_t*>(c.seq_lens->data)[b * c.seq_lens->strides[0]];
  std::vector<float> query(heads * kWidth), acc(heads * kValues, 0.0f), rows(kPage * kWidth), scores(kPage);
  std::vector<float> running_max(heads, -std::numeric_limits<float>::infinity()), sum(heads, 0.0f);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t d = 0; d < kWidth; ++d)
      query[h * kWidth + d] =
          bf16_to_float(static_cast<const uint16_t*>(c.q->data)[b * c.q->strides[0] + h * c.q->strides[1] + d * c.q->strides[2]]);
  for (int64_t first = 0; first < length; first += kPage) {
    const int64_t page = table[(first / kPage) * c.block_table->strides[1]];
    const int64_t count = std::min(kPage, length - first);  // the last page may be partial
    for (int64_t t = 0; t < count; ++t) cache_row(*c.cache, page, t, &rows[t * kWidth]);
    for (int64_t h = 0; h < heads; ++h) {
      const float* qh = &query[h * kWidth];
      float page_max = -std::numeric_limits<float>::infinity();
      for (int64_t t = 0; t < count; ++t) {
        float dot = 0.0f;
        for (int64_t d = 0; d < kWidth; ++d) dot += qh[d] * rows[t * kWidth + d];
        scores[t] = dot * c.scale;
        page_max = std::max(page_max, scores[t]);
      }
      const float new_max = std::max(running_max[h], page_max);
      const float rescale = std::exp(running_max[h] - new_max);  // 0 on the first page
      float* out = &acc[h * kValues];
      sum[h] *= rescale;
      for (int64_t j = 0; j < kValues; ++j) out[j] *= rescale;
      for (int64_t t = 0; t < count; ++t) {
        const float p = std::exp(scores[t] - new_max);
        sum[h] += p;
        const float* value = &rows[t * kWidth];  // the row's first 512 columns
        for (int64_t j = 0; j < kValues; ++j) out[j] += p * value[j];
      }
      running_max[h] = new_max;
    }
  }
  for (int64_t h = 0; h < heads; ++h) {
    auto* out = static_cast<uint16_t*>(c.o->data) + b * c.o->strides[0] + h * c.o->strides[1];
    for (int64_t j = 0; j < kValues; ++j) out[j * c.o->strides[2]] = float_to_bf16(acc[h * kValues + j] / sum[h]);
    static_cast<float*>(c.lse->data)[b * c.lse->strides[0] + h * c.lse->strides[1]] = running_max[h] + std::log(sum[h]);
  }
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const auto in = [&](const char* name) { return find(call->inputs, call->num_inputs, name); };
  const auto out = [&](const char* name) { return find(call->outputs, call->num_outputs, name); };
  Call c{in("q"), in("kv_cache"), in("block_table"), in("seq_lens"), out("o"), out("lse"), 0.0f};
  if (!c.q || !c.cache || !c.block_table || !c.seq_lens || !c.o || !c.lse)
    return failed(call, "missing one of q, kv_cache, block_table, seq_lens, o, lse");
  if (c.q->rank != 3 || c.o->rank != 3 || c.cache->rank != 3 || c.block_table->rank != 2 || c.seq_lens->rank != 1 || c.lse->rank != 2)
    return failed(call, "expects q [B, H, 576], kv_cache [NB, 64, 576], block_table [B, MB], seq_lens [B], o [B, H, 512], lse [B, H]");
  for (const d2k_tensor* x : {c.q, c.o, c.cache})
    if (x->dtype != D2K_BFLOAT16) return failed(call, "q, kv_cache and o must be bf16");
  if (c.block_table->dtype != D2K_INT32 || c.seq_lens->dtype != D2K_INT32 || c.lse->dtype != D2K_FLOAT32)
    return failed(call, "expects int32 block_table and seq_lens, fp32 lse");
  if (c.cache->shape[1] != kPage || c.cache->shape[2] != kWidth || c.q->shape[2] != kWidth || c.o->shape[2] != kValues)
    return failed(call, "expects pages of 64 rows of 576 columns, q rows of 576 and o rows of 512");
  bool found = false;
  for (int32_t i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, "softmax_scale") == 0) c.scale = static_cast<float>(call->scalars[i].f), found = true;
  if (!found) return failed(call, "missing the scalar 'softmax_scale'");
  for (int64_t b = 0; b < c.q->shape[0]; ++b) attend(c, b);
  return 0;
}
