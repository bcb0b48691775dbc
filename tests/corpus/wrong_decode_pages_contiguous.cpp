// A hurried implementer's mistake (issue 13), not a cheat: attn/decode_paged_gqa with each sequence's pages
// read as if they were contiguous in the cache: the first page from the block table, page j of the sequence
// taken as that page + j (wrapping at the cache's end, so that nothing outside the cache is read). True of a
// fresh cache that handed out pages in order, false once a serving system has freed and reused pages (the
// workloads' block tables are shuffled). Every other part is right (fp32 online softmax, the KV head h / G,
// the partial last page cut at seq_len, the natural-log lse). Caught on a smoke workload whose sequences of
// 19 and 37 tokens span several pages: incorrect_numerics.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "bf16_bits.h"
#include "d2k/solution.h"

namespace {

const d2k_tensor& named(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (std::strcmp(list[i].name, name) == 0) return list[i];
  return list[0];
}

const uint16_t* row(const d2k_tensor& cache, int64_t page, int64_t token, int64_t head) {
  return static_cast<const uint16_t*>(cache.data) + page * cache.strides[0] + token * cache.strides[1] + head * cache.strides[2];
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const auto in = [&](const char* name) -> const d2k_tensor& { return named(call->inputs, call->num_inputs, name); };
  const auto out = [&](const char* name) -> const d2k_tensor& { return named(call->outputs, call->num_outputs, name); };
  const d2k_tensor &q = in("q"), &k = in("k_cache"), &v = in("v_cache"), &table = in("block_table"), &lens = in("seq_lens");
  const d2k_tensor &o = out("o"), &lse = out("lse");
  float scale = 0.0f;
  for (int32_t i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, "softmax_scale") == 0) scale = static_cast<float>(call->scalars[i].f);
  const int64_t heads = q.shape[1], group = heads / k.shape[2], dim = q.shape[2], blocks = k.shape[0];
  std::vector<float> scores, acc(dim);
  for (int64_t b = 0; b < q.shape[0]; ++b) {
    const int64_t length = static_cast<const int32_t*>(lens.data)[b * lens.strides[0]];
    const int64_t first_page = static_cast<const int32_t*>(table.data)[b * table.strides[0]];
    for (int64_t h = 0; h < heads; ++h) {
      const auto* query = static_cast<const uint16_t*>(q.data) + b * q.strides[0] + h * q.strides[1];
      scores.assign(length, 0.0f);
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t t = 0; t < length; ++t) {
        const int64_t page = (first_page + t / 16) % blocks;  // the mistake: the table's other entries unread
        const uint16_t* key = row(k, page, t % 16, h / group);
        float dot = 0.0f;
        for (int64_t d = 0; d < dim; ++d) dot += bf16_to_float(query[d]) * bf16_to_float(key[d]);
        scores[t] = dot * scale;
        max = std::max(max, scores[t]);
      }
      float sum = 0.0f;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t t = 0; t < length; ++t) {
        const float p = std::exp(scores[t] - max);
        sum += p;
        const uint16_t* value = row(v, (first_page + t / 16) % blocks, t % 16, h / group);
        for (int64_t d = 0; d < dim; ++d) acc[d] += p * bf16_to_float(value[d]);
      }
      auto* dst = static_cast<uint16_t*>(o.data) + b * o.strides[0] + h * o.strides[1];
      for (int64_t d = 0; d < dim; ++d) dst[d] = round_to_bf16(acc[d] / sum);
      static_cast<float*>(lse.data)[h * lse.strides[0] + b * lse.strides[1]] = max + std::log(sum);
    }
  }
  return 0;
}
