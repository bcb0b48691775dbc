// moe/grouped_topk, versions 2 and 3: the host side of a call (its checks, error messages and the row mapping),
// shared by d2k_run and the host emulation of the kernel.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"
#include "route_row.cuh"

namespace gtopk {

constexpr int kMaxK = 32;

inline int fail(const d2k_call* call, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(call->error, D2K_ERROR_CAPACITY, format, args);
  va_end(args);
  return 1;
}

inline const d2k_tensor* find(const d2k_tensor* list, int n, const char* name) {
  for (int i = 0; i < n; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

inline const d2k_scalar* find_scalar(const d2k_call* call, const char* name) {
  for (int i = 0; i < call->num_scalars; ++i)
    if (call->scalars[i].name && std::strcmp(call->scalars[i].name, name) == 0) return &call->scalars[i];
  return nullptr;
}

inline int power_of_two_at_least(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

// Checks the call and fills p; nt is the kernel's template width (the experts a lane holds, rounded up to
// a power of two) and full whether every lane holds exactly nt experts. Returns non-zero with call->error
// written when the call is not supported (v1's checks and messages).
inline int plan(const d2k_call* call, Problem& p, int& nt, bool& full) {
  const d2k_tensor* logits = find(call->inputs, call->num_inputs, "logits");
  const d2k_tensor* bias = find(call->inputs, call->num_inputs, "bias");
  const d2k_tensor* weights = find(call->outputs, call->num_outputs, "weights");
  const d2k_tensor* ids = find(call->outputs, call->num_outputs, "ids");
  const d2k_scalar* groups = find_scalar(call, "num_expert_group");
  const d2k_scalar* keep = find_scalar(call, "topk_group");
  const d2k_scalar* renormalize = find_scalar(call, "renormalize");
  const d2k_scalar* scale = find_scalar(call, "routed_scaling_factor");
  if (!logits || !bias || !weights || !ids || !groups || !keep || !renormalize || !scale)
    return fail(call, "grouped_topk: expected inputs logits, bias, outputs weights, ids and the four scalars");
  if (logits->dtype != D2K_FLOAT32 || bias->dtype != D2K_FLOAT32 || weights->dtype != D2K_FLOAT32 || ids->dtype != D2K_INT32)
    return fail(call, "grouped_topk: expected logits, bias, weights f32 and ids i32");
  p = Problem{};
  p.T = logits->shape[0], p.E = static_cast<int>(logits->shape[1]), p.k = static_cast<int>(weights->shape[1]);
  p.groups = static_cast<int>(groups->i), p.keep = static_cast<int>(keep->i);
  if (p.groups < 1 || p.groups > 32 || p.E % p.groups != 0 || p.E / p.groups < 2 || p.keep < 1 || p.keep > p.groups ||
      p.k < 1 || p.k > kMaxK || p.k > p.keep * (p.E / p.groups))
    return fail(call, "grouped_topk: unsupported E=%d, groups=%d, topk_group=%d, k=%d", p.E, p.groups, p.keep, p.k);
  p.per_group = p.E / p.groups;
  // v1's lane count: groups rounded up to a power of two, times the lanes (of 32 experts) a group needs.
  const int lanes = power_of_two_at_least(p.groups) * power_of_two_at_least((p.per_group + 31) / 32);
  if (lanes > 32)
    return fail(call, "grouped_topk: %d groups of %d experts need %d lanes a token; this kernel takes at most 32",
                p.groups, p.per_group, lanes);
  // Version 2 spreads a row over the whole warp: m lanes a group, N experts a lane (N <= 32 exactly when
  // v1's lane count is at most 32, so both accept the same shapes).
  p.group_slots = power_of_two_at_least(p.groups);
  const int m = 32 / p.group_slots;
  p.lane_shift = 0;
  while ((1 << p.lane_shift) < m) ++p.lane_shift;
  p.per_lane = (p.per_group + m - 1) / m;
  p.logits = static_cast<const float*>(logits->data), p.l_row = logits->strides[0], p.l_col = logits->strides[1];
  p.bias = static_cast<const float*>(bias->data), p.b_stride = bias->strides[0];
  p.weights = static_cast<float*>(weights->data), p.w_row = weights->strides[0], p.w_col = weights->strides[1];
  p.ids = static_cast<int32_t*>(ids->data), p.i_row = ids->strides[0], p.i_col = ids->strides[1];
  p.renormalize = static_cast<int>(renormalize->i != 0);
  p.scale = static_cast<float>(scale->f);
  nt = power_of_two_at_least(p.per_lane);
  p.vector_loads = p.l_col == 1 && p.l_row % 4 == 0 && p.b_stride == 1 && p.per_group % 4 == 0 &&
                   p.per_lane == nt && nt % 4 == 0 && reinterpret_cast<uintptr_t>(p.logits) % 16 == 0 && reinterpret_cast<uintptr_t>(p.bias) % 16 == 0;
  full = p.vector_loads && p.per_group == m * p.per_lane && p.groups == p.group_slots;
  return 0;
}

}  // namespace gtopk
