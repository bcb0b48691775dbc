// A hurried implementer's mistake (issue 13), not a cheat: attn/decode_mla with V taken from the last 512
// columns of each 576-wide latent row (columns 64..575) instead of the first 512. A kernel adapted from one
// whose cache stores [k_pe | kv_c], or that reads "the 512 columns after the 64 rotary ones", makes it;
// vLLM's concat_and_cache_mla writes kv_c first. Every other part is right (the scores over all 576 columns,
// the pages through the block table, the partial last page cut at seq_len, fp32 softmax, the natural-log
// lse [B, H]), so the lse is exact and o is wrong everywhere. Caught on a smoke workload: incorrect_numerics
// naming 'o'.
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

const uint16_t* row(const d2k_tensor& cache, int64_t page, int64_t token) {
  return static_cast<const uint16_t*>(cache.data) + page * cache.strides[0] + token * cache.strides[1];
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const auto in = [&](const char* name) -> const d2k_tensor& { return named(call->inputs, call->num_inputs, name); };
  const auto out = [&](const char* name) -> const d2k_tensor& { return named(call->outputs, call->num_outputs, name); };
  const d2k_tensor &q = in("q"), &cache = in("kv_cache"), &table = in("block_table"), &lens = in("seq_lens");
  const d2k_tensor &o = out("o"), &lse = out("lse");
  float scale = 0.0f;
  for (int32_t i = 0; i < call->num_scalars; ++i)
    if (std::strcmp(call->scalars[i].name, "softmax_scale") == 0) scale = static_cast<float>(call->scalars[i].f);
  const int64_t heads = q.shape[1], width = q.shape[2], values = o.shape[2];
  const int64_t first_value = width - values;  // the mistake: 64, the last 512 columns; the first 512 start at 0
  std::vector<float> scores, acc(values);
  for (int64_t b = 0; b < q.shape[0]; ++b) {
    const int64_t length = static_cast<const int32_t*>(lens.data)[b * lens.strides[0]];
    const auto* pages = static_cast<const int32_t*>(table.data) + b * table.strides[0];
    for (int64_t h = 0; h < heads; ++h) {
      const auto* query = static_cast<const uint16_t*>(q.data) + b * q.strides[0] + h * q.strides[1];
      scores.assign(length, 0.0f);
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t t = 0; t < length; ++t) {
        const uint16_t* key = row(cache, pages[(t / 64) * table.strides[1]], t % 64);
        float dot = 0.0f;
        for (int64_t d = 0; d < width; ++d) dot += bf16_to_float(query[d]) * bf16_to_float(key[d]);
        scores[t] = dot * scale;
        max = std::max(max, scores[t]);
      }
      float sum = 0.0f;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t t = 0; t < length; ++t) {
        const float p = std::exp(scores[t] - max);
        sum += p;
        const uint16_t* value = row(cache, pages[(t / 64) * table.strides[1]], t % 64) + first_value;
        for (int64_t j = 0; j < values; ++j) acc[j] += p * bf16_to_float(value[j]);
      }
      auto* dst = static_cast<uint16_t*>(o.data) + b * o.strides[0] + h * o.strides[1];
      for (int64_t j = 0; j < values; ++j) dst[j] = round_to_bf16(acc[j] / sum);
      static_cast<float*>(lse.data)[b * lse.strides[0] + h * lse.strides[1]] = max + std::log(sum);
    }
  }
  return 0;
}
