// Plain host solution of loss/cross_entropy for the cpu device: the counted rows first (the mean's
// denominator), then per row the max, the sum of exp(x - max) (accumulated in double), the loss, and the
// gradient (exp(x - lse) - [j == target]) / count in fp32, rounded once to bf16 over the logits; an ignored
// row gets zeros without being read. Any row stride.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr int64_t kIgnoreIndex = -100;

float bf16_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// Round to nearest, ties to even (the values here are finite).
uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

int failed(const d2k_call* call, const char* message) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "cross_entropy (cpu): %s", message);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* logits = find(call->outputs, call->num_outputs, "logits");
  const d2k_tensor* targets = find(call->inputs, call->num_inputs, "targets");
  const d2k_tensor* loss = find(call->outputs, call->num_outputs, "loss");
  if (!logits || !targets || !loss) return failed(call, "missing the output 'logits' or 'loss', or the input 'targets'");
  if (logits->dtype != D2K_BFLOAT16 || logits->rank != 2 || targets->dtype != D2K_INT64 || targets->rank != 1 ||
      loss->dtype != D2K_FLOAT32 || loss->rank != 1)
    return failed(call, "expects logits [N, V] bf16, targets [N] int64 and loss [N] fp32");
  const int64_t rows = logits->shape[0], vocab = logits->shape[1];
  if (targets->shape[0] != rows || loss->shape[0] != rows) return failed(call, "targets and loss must have N elements");

  auto* x = static_cast<uint16_t*>(logits->data);
  const auto* y = static_cast<const int64_t*>(targets->data);
  auto* l = static_cast<float*>(loss->data);
  int64_t count = 0;
  for (int64_t i = 0; i < rows; ++i) count += y[i * targets->strides[0]] != kIgnoreIndex;
  const float inv_count = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;

  for (int64_t i = 0; i < rows; ++i) {
    uint16_t* row = x + i * logits->strides[0];
    const int64_t step = logits->strides[1];
    const int64_t target = y[i * targets->strides[0]];
    if (target == kIgnoreIndex) {
      for (int64_t j = 0; j < vocab; ++j) row[j * step] = 0;
      l[i * loss->strides[0]] = 0.0f;
      continue;
    }
    if (target < 0 || target >= vocab) return failed(call, "a target outside [0, V) that is not -100");
    float max = -INFINITY;
    for (int64_t j = 0; j < vocab; ++j) max = std::fmax(max, bf16_to_float(row[j * step]));
    double sum = 0.0;
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(bf16_to_float(row[j * step]) - max);
    const float log_sum = static_cast<float>(std::log(sum));
    l[i * loss->strides[0]] = (max - bf16_to_float(row[target * step])) + log_sum;
    // exp((x - max) - log S), not exp(x - lse): lse rounds at the magnitude of the max, which would cost
    // a confident target's probability minus one most of its bits.
    for (int64_t j = 0; j < vocab; ++j) {
      float g = std::exp((bf16_to_float(row[j * step]) - max) - log_sum) * inv_count;
      if (j == target) g -= inv_count;
      row[j * step] = float_to_bf16(g);
    }
  }
  return 0;
}
