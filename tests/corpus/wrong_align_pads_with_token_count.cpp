// A hurried implementer's mistake (issue 12), not a cheat: moe/align_block_size padding with the token
// count T where the task (and vLLM's fused_moe, which masks `offs_token < num_valid_tokens`) pads with
// T*k. T is a valid flat index, so the GEMM would compute entry T once per pad. Caught on a smoke
// workload: incorrect_numerics, "'sorted_token_ids'", the message naming entry T as repeated.
#include <cstdint>
#include <cstring>
#include <vector>

#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& ids = call->inputs[0];
  const d2k_tensor &sorted = call->outputs[0], &blocks = call->outputs[1], &total_out = call->outputs[2];
  int64_t E = 0, B = 0;
  for (int i = 0; i < call->num_scalars; ++i) {
    if (std::strcmp(call->scalars[i].name, "num_experts") == 0) E = call->scalars[i].i;
    if (std::strcmp(call->scalars[i].name, "block_size") == 0) B = call->scalars[i].i;
  }
  const int64_t T = ids.shape[0], N = T * ids.shape[1];
  const auto* in = static_cast<const int32_t*>(ids.data);
  auto* out = static_cast<int32_t*>(sorted.data);
  auto* expert_of_block = static_cast<int32_t*>(blocks.data);
  std::vector<int64_t> count(E, 0), start(E + 1, 0);
  for (int64_t i = 0; i < N; ++i) ++count[in[i]];
  for (int64_t e = 0; e < E; ++e) start[e + 1] = start[e] + (count[e] + B - 1) / B * B;
  for (int64_t p = 0; p < sorted.shape[0]; ++p) out[p] = static_cast<int32_t>(T);  // the mistake: T, not T*k
  std::vector<int64_t> cursor(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < N; ++i) out[cursor[in[i]]++] = static_cast<int32_t>(i);
  for (int64_t b = 0; b < blocks.shape[0]; ++b) expert_of_block[b] = 0;
  for (int64_t e = 0; e < E; ++e)
    for (int64_t b = start[e] / B; b < start[e + 1] / B; ++b) expert_of_block[b] = static_cast<int32_t>(e);
  *static_cast<int32_t*>(total_out.data) = static_cast<int32_t>(start[E]);
  return 0;
}
