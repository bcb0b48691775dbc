// moe/align_block_size on the cpu device: a counting sort. Count each expert's entries, scan the counts
// rounded up to the block size, then place every entry at its expert's cursor (flat-index order; the task
// allows any order inside an expert's run). Pads and the tail are written once each.
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "d2k/solution.h"

namespace {

int fail(const d2k_call* call, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(call->error, D2K_ERROR_CAPACITY, format, args);
  va_end(args);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int n, const char* name) {
  for (int i = 0; i < n; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

const d2k_scalar* find_scalar(const d2k_call* call, const char* name) {
  for (int i = 0; i < call->num_scalars; ++i)
    if (call->scalars[i].name && std::strcmp(call->scalars[i].name, name) == 0) return &call->scalars[i];
  return nullptr;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* ids = find(call->inputs, call->num_inputs, "topk_ids");
  const d2k_tensor* sorted = find(call->outputs, call->num_outputs, "sorted_token_ids");
  const d2k_tensor* blocks = find(call->outputs, call->num_outputs, "expert_ids");
  const d2k_tensor* total_out = find(call->outputs, call->num_outputs, "num_tokens_post_pad");
  const d2k_scalar* experts = find_scalar(call, "num_experts");
  const d2k_scalar* block_size = find_scalar(call, "block_size");
  if (!ids || !sorted || !blocks || !total_out || !experts || !block_size)
    return fail(call, "align_block_size: expected input topk_ids, outputs sorted_token_ids, expert_ids, "
                      "num_tokens_post_pad and scalars num_experts, block_size");
  if (ids->dtype != D2K_INT32 || sorted->dtype != D2K_INT32 || blocks->dtype != D2K_INT32 || total_out->dtype != D2K_INT32)
    return fail(call, "align_block_size: every tensor is int32");
  const int64_t T = ids->shape[0], k = ids->shape[1], N = T * k, E = experts->i, B = block_size->i;
  if (ids->rank != 2 || ids->strides[1] != 1 || ids->strides[0] != k)
    return fail(call, "align_block_size: topk_ids must be a row-major [T, k] tensor");
  if (E < 1 || B < 1 || sorted->shape[0] != N + E * (B - 1) || blocks->shape[0] != (sorted->shape[0] + B - 1) / B)
    return fail(call, "align_block_size: output sizes %lld and %lld do not fit N=%lld, E=%lld, B=%lld",
                (long long)sorted->shape[0], (long long)blocks->shape[0], (long long)N, (long long)E, (long long)B);

  const auto* in = static_cast<const int32_t*>(ids->data);
  auto* out = static_cast<int32_t*>(sorted->data);
  auto* expert_of_block = static_cast<int32_t*>(blocks->data);
  std::vector<int64_t> count(E, 0), start(E + 1, 0);
  for (int64_t i = 0; i < N; ++i) {
    if (in[i] < 0 || in[i] >= E) return fail(call, "align_block_size: topk_ids[%lld] = %d is not an expert of %lld", (long long)i, in[i], (long long)E);
    ++count[in[i]];
  }
  for (int64_t e = 0; e < E; ++e) start[e + 1] = start[e] + (count[e] + B - 1) / B * B;
  const int64_t total = start[E];

  std::vector<int64_t> cursor(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < N; ++i) out[cursor[in[i]]++] = static_cast<int32_t>(i);
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t p = cursor[e]; p < start[e + 1]; ++p) out[p] = static_cast<int32_t>(N);
    for (int64_t b = start[e] / B; b < start[e + 1] / B; ++b) expert_of_block[b] = static_cast<int32_t>(e);
  }
  for (int64_t p = total; p < sorted->shape[0]; ++p) out[p] = static_cast<int32_t>(N);
  for (int64_t b = total / B; b < blocks->shape[0]; ++b) expert_of_block[b] = 0;
  *static_cast<int32_t*>(total_out->data) = static_cast<int32_t>(total);
  return 0;
}
