// A hurried implementer's mistake (issue 13), not a cheat: attn/prefill_sliding_window with the window read
// as the models' configs count it, W keys including the query (i - W < j <= i), where the task's W is
// FlashAttention's window_size_left (i - W <= j <= i, W + 1 keys). Every query at least W + 1 tokens into
// its sequence loses its band's oldest key. Every other part is right (fp32 online softmax, the KV head
// h / G, the natural-log lse). Caught on the D-64 smoke workload (W 31, sequences of up to 139 tokens):
// incorrect_numerics, o and lse both off, the message naming 'lse' (the first compared).
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

float element(const d2k_tensor& x, int64_t t, int64_t h, int64_t d) {
  return bf16_to_float(static_cast<const uint16_t*>(x.data)[t * x.strides[0] + h * x.strides[1] + d * x.strides[2]]);
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const auto in = [&](const char* name) -> const d2k_tensor& { return named(call->inputs, call->num_inputs, name); };
  const auto out = [&](const char* name) -> const d2k_tensor& { return named(call->outputs, call->num_outputs, name); };
  const d2k_tensor &q = in("q"), &k = in("k"), &v = in("v"), &cu = in("cu_seqlens"), &o = out("o"), &lse = out("lse");
  float scale = 0.0f;
  int64_t window = 0;
  for (int32_t i = 0; i < call->num_scalars; ++i) {
    if (std::strcmp(call->scalars[i].name, "softmax_scale") == 0) scale = static_cast<float>(call->scalars[i].f);
    if (std::strcmp(call->scalars[i].name, "window_left") == 0) window = call->scalars[i].i;
  }
  const int64_t heads = q.shape[1], group = heads / k.shape[1], dim = q.shape[2];
  const auto* offsets = static_cast<const int32_t*>(cu.data);
  std::vector<float> scores, acc(dim);
  for (int64_t b = 0; b + 1 < cu.shape[0]; ++b) {
    const int64_t first = offsets[b], length = offsets[b + 1] - first;
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < length; ++i) {
        // The mistake: the oldest key is i - W + 1, not i - W.
        const int64_t oldest = std::max<int64_t>(0, i - window + 1);
        scores.assign(i + 1 - oldest, 0.0f);
        float max = -std::numeric_limits<float>::infinity();
        for (int64_t j = oldest; j <= i; ++j) {
          float dot = 0.0f;
          for (int64_t d = 0; d < dim; ++d) dot += element(q, first + i, h, d) * element(k, first + j, h / group, d);
          scores[j - oldest] = dot * scale;
          max = std::max(max, scores[j - oldest]);
        }
        float sum = 0.0f;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t j = oldest; j <= i; ++j) {
          const float p = std::exp(scores[j - oldest] - max);
          sum += p;
          for (int64_t d = 0; d < dim; ++d) acc[d] += p * element(v, first + j, h / group, d);
        }
        auto* row = static_cast<uint16_t*>(o.data) + (first + i) * o.strides[0] + h * o.strides[1];
        for (int64_t d = 0; d < dim; ++d) row[d * o.strides[2]] = round_to_bf16(acc[d] / sum);
        static_cast<float*>(lse.data)[h * lse.strides[0] + (first + i) * lse.strides[1]] = max + std::log(sum);
      }
    }
  }
  return 0;
}
